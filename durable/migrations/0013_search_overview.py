# The console's search (durable_runsearch and, on Postgres, its trigram indexes) and the overview's indexes.
# Runs that exist already are found by their business key; their searchable input fields only for runs
# started from here on (their workflows' declarations are not known to a migration).

import django.db.models.deletion
from django.conf import settings
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models

BACKFILL = """
    INSERT INTO durable_runsearch (run_id, created_at, business_key, field_text, fields)
    SELECT id, created_at, lower(business_key), '', '{}' FROM durable_run"""
TRIGRAM_INDEXES = {
    "run_search_business_key": "business_key",
    "run_search_fields": "field_text",
}


def trigram_indexes(apps, schema_editor):
    """GIN trigram indexes: a LIKE '%fragment%' reads the index, not a million rows. Postgres only;
    elsewhere the search is a plain LIKE (durable/console/search.py)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, column in TRIGRAM_INDEXES.items():
        schema_editor.execute(f"CREATE INDEX {name} ON durable_runsearch USING gin ({column} gin_trgm_ops)")


def drop_trigram_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in TRIGRAM_INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):

    dependencies = [
        ('durable', '0012_notifications'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        TrigramExtension(),
        migrations.CreateModel(
            name='RunSearch',
            fields=[
                ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='search', serialize=False, to='durable.run')),
                ('created_at', models.DateTimeField(help_text="the run's, so results page in the runs list's order")),
                ('business_key', models.CharField(help_text="the run's, lower-cased", max_length=200)),
                ('field_text', models.TextField(blank=True, help_text="one searchable field's value a line, lower-cased")),
                ('fields', models.JSONField(blank=True, default=dict)),
            ],
        ),
        migrations.AddIndex(
            model_name='journalentry',
            index=models.Index(condition=models.Q(('kind', 'duplicate_prevented')), fields=['created_at'], name='journal_duplicates'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('finished_at__isnull', False)), fields=['finished_at', 'status'], name='run_finished'),
        ),
        migrations.AddIndex(
            model_name='runsearch',
            index=models.Index(fields=['-created_at', '-run'], name='run_search_created'),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.RunPython(trigram_indexes, drop_trigram_indexes),
    ]
