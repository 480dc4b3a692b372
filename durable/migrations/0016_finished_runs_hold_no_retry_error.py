"""Runs that succeeded or were cancelled before the finish cleared the error keep no retry's error.

Until then a run that succeeded after a retry kept that retry's error in `error`, and the API reported it.
The retry's error stays in the journal (its retry_scheduled entry), where the timeline reads it.
"""
from django.db import migrations


def clear_stale_errors(apps, schema_editor):
    Run = apps.get_model("durable", "Run")
    Run.objects.filter(status__in=("SUCCEEDED", "CANCELLED"), error__isnull=False).update(error=None)


class Migration(migrations.Migration):
    dependencies = [("durable", "0015_redundant_run_indexes")]
    operations = [migrations.RunPython(clear_stale_errors, migrations.RunPython.noop, elidable=True)]
