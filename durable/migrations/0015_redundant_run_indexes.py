"""Drop the run_id index of the two append-only tables whose other indexes start with run_id
(checkpoint_run_seq, journal_run_step): every step inserts a checkpoint, and each index is one
more entry to write. Only the index goes: the foreign key stays as it is (Django's AlterField
would drop and re-add it, validating every row of a large table under a lock)."""
import django.db.models.deletion
from django.db import migrations, models

INDEXES = {"durable_checkpoint": "durable_checkpoint_run_id_da1f2d5d",
           "durable_journalentry": "durable_journalentry_run_id_7547b9da"}


def unindexed(model_name: str, related_name: str) -> migrations.SeparateDatabaseAndState:
    table = f"durable_{model_name}"
    return migrations.SeparateDatabaseAndState(
        state_operations=[migrations.AlterField(
            model_name=model_name, name="run",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name=related_name, to="durable.run"),
        )],
        database_operations=[migrations.RunSQL(
            f'DROP INDEX IF EXISTS "{INDEXES[table]}"',
            f'CREATE INDEX IF NOT EXISTS "{INDEXES[table]}" ON "{table}" ("run_id")',
        )],
    )


class Migration(migrations.Migration):

    dependencies = [
        ("durable", "0014_hot_path"),
    ]

    operations = [
        unindexed("checkpoint", "checkpoints"),
        unindexed("journalentry", "journal"),
    ]
