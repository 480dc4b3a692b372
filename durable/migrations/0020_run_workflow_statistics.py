"""The planner's estimate of runs per workflow and version (Postgres only): their combinations are counted
together (extended statistics, a most-common-values list), not multiplied as if independent.

A workflow's versions are its own (one workflow has v1 to v7, another only v1), so multiplying the share of a
name by the share of a version misjudges the console's runs list filtered on both. With a million runs parked on
timers and events beside the console benchmark's million, it misjudged `workflow=bench-console-2&version=3
&status=FAILED` by a factor of 7 and chose to read every run of the version (a BitmapAnd, 63-230 ms) instead of
the newest failed runs (run_status_created, 1.5-20 ms): `durable_bench --parked 1000000 --keep`, then
`durable_console_bench --reuse` (docs/scaling.md).
"""
from django.db import migrations

STATISTICS = "run_workflow_version"


def create_statistics(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"CREATE STATISTICS IF NOT EXISTS {STATISTICS} (mcv) "
                              "ON workflow_name, workflow_version FROM durable_run")
        schema_editor.execute("ANALYZE durable_run")  # a sample of the table: seconds, and the estimates hold at once


def drop_statistics(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP STATISTICS IF EXISTS {STATISTICS}")


class Migration(migrations.Migration):
    dependencies = [("durable", "0019_waits")]

    operations = [migrations.RunPython(create_statistics, drop_statistics, elidable=False)]
