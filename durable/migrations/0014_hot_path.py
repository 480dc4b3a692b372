"""Room on durable_run's pages for heap-only (HOT) updates: a step's UPDATE changes no indexed
column (durable/store/postgres.py), and Postgres can then keep the new row version on the same
page without touching the table's indexes, if the page has space for it. Postgres only; a
fillfactor applies to pages written from now on (VACUUM FULL or pg_repack rewrites the old ones)."""
from django.db import migrations

FILLFACTOR = 70


def set_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE durable_run SET (fillfactor = {FILLFACTOR})")


def reset_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE durable_run RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("durable", "0013_search_overview")]

    operations = [migrations.RunPython(set_fillfactor, reset_fillfactor, elidable=False)]
