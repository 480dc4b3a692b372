"""What the planner knows of durable_run and durable_runsearch (Postgres only), so that a million runs parked on
timers and events beside the others do not change the console's plans for the worse (`durable_bench --parked
1000000 --keep`, then `durable_console_bench --reuse`; docs/scaling.md, "Runs parked on timers and events").

- Runs per workflow and version: their combinations are counted together (extended statistics, a list of the most
  common ones), not multiplied as if independent. A workflow's versions are its own (one has v1 to v7, another
  only v1); multiplied, the runs list filtered on `workflow=bench-console-2&version=3&status=FAILED` was misjudged
  7-fold and read every run of the version (a BitmapAnd, 63-230 ms) instead of the newest failed ones
  (run_status_created, 1.5-20 ms).
- The search's business keys and fields: a histogram of 1,000 values, not 100. With the parked runs' keys
  (`PARK-...`) beside the others (`ORD-...`), a 100-value histogram held no `ord-99...` key, the search for a part
  thousands of runs share (`ord-99`) was judged to match 200 runs, and it sorted all 11,111 matches (88 ms)
  instead of reading the newest runs until 50 matched (2-11 ms). ANALYZE samples 300,000 rows for it.
"""
from django.db import migrations

STATISTICS = "run_workflow_version"
SEARCHED = ("business_key", "field_text")
HISTOGRAM = 1000


def tell_the_planner(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"CREATE STATISTICS IF NOT EXISTS {STATISTICS} (mcv) "
                          "ON workflow_name, workflow_version FROM durable_run")
    for column in SEARCHED:
        schema_editor.execute(f"ALTER TABLE durable_runsearch ALTER COLUMN {column} SET STATISTICS {HISTOGRAM}")
    schema_editor.execute("ANALYZE durable_run, durable_runsearch")  # samples: seconds, and the plans hold at once


def forget(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP STATISTICS IF EXISTS {STATISTICS}")
    for column in SEARCHED:
        schema_editor.execute(f"ALTER TABLE durable_runsearch ALTER COLUMN {column} SET STATISTICS -1")


class Migration(migrations.Migration):
    dependencies = [("durable", "0021_costs")]

    operations = [migrations.RunPython(tell_the_planner, forget, elidable=False)]
