"""Step visits (docs/workflows.md, "Visits"): journal entries and ledger rows name the visit they belong to,
the seq of the checkpoint the step's execution started from. Rows written before stay NULL (no backfill of
the journal): a NULL activity result is read as the newest visit of its step, so in-flight runs resume
unchanged. One recorded result per call position now means per visit."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('durable', '0017_processes_and_sweep_turn'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='journalentry',
            name='journal_one_result_per_call',
        ),
        migrations.AddField(
            model_name='journalentry',
            name='visit',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='sideeffect',
            name='visit',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='journalentry',
            name='kind',
            field=models.CharField(choices=[('activity', 'Activity'), ('retry_scheduled', 'Retry Scheduled'), ('failed', 'Failed'), ('replay_violation', 'Replay Violation'), ('contract_blocked', 'Contract Blocked'), ('operator', 'Operator'), ('side_effect', 'Side Effect'), ('duplicate_prevented', 'Duplicate Prevented'), ('reconciliation', 'Reconciliation'), ('needs_attention', 'Needs Attention'), ('approval', 'Approval'), ('activity_reused', 'Activity Reused'), ('parallel', 'Parallel')], max_length=30),
        ),
        migrations.AddConstraint(
            model_name='journalentry',
            constraint=models.UniqueConstraint(condition=models.Q(('kind', 'activity'), ('visit__isnull', False)), fields=('run', 'step', 'visit', 'call_index'), name='journal_one_result_per_visit_call'),
        ),
        migrations.AddConstraint(
            model_name='journalentry',
            constraint=models.UniqueConstraint(condition=models.Q(('kind', 'activity'), ('visit__isnull', True)), fields=('run', 'step', 'call_index'), name='journal_one_result_per_call'),
        ),
    ]
