"""Approval requests belong to a visit and to their place in it (docs/approvals.md, "Approvals in loops").

Existing requests are given the visit they were asked in: before visits, each step was visited once, so
it is the newest checkpoint that led to their step. An approved request the run already revalidated and
acted on (journaled "approval_used") is marked used, so a re-execution of its visit does not revalidate it
against the run's own action.
"""
from django.conf import settings
from django.db import migrations, models

VISIT_OF_EACH_REQUEST = """
UPDATE approvals_approvalrequest SET visit = COALESCE((
    SELECT MAX(cp.seq) FROM durable_checkpoint AS cp
     WHERE cp.run_id = approvals_approvalrequest.run_id AND cp.next_step = approvals_approvalrequest.step), 0)
"""


def mark_used(apps, schema_editor) -> None:
    JournalEntry = apps.get_model("durable", "JournalEntry")
    ApprovalRequest = apps.get_model("approvals", "ApprovalRequest")
    used = JournalEntry.objects.filter(kind="approval", detail__event="approval_used")
    for request_id, at in used.values_list("detail__request", "created_at").iterator():
        ApprovalRequest.objects.filter(id=request_id, status="APPROVED", used_at__isnull=True).update(used_at=at)


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0002_overview'),
        ('durable', '0018_visits'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='approvalrequest',
            name='approval_one_pending',
        ),
        migrations.RemoveConstraint(
            model_name='approvalrequest',
            name='approval_run_step_ask',
        ),
        migrations.AddField(
            model_name='approvalrequest',
            name='position',
            field=models.PositiveSmallIntegerField(default=1, help_text='the n-th request_approval of that visit'),
        ),
        migrations.AddField(
            model_name='approvalrequest',
            name='used_at',
            field=models.DateTimeField(blank=True, help_text='when the run revalidated it and went on to act: its visit run again reuses that verdict', null=True),
        ),
        migrations.AddField(
            model_name='approvalrequest',
            name='visit',
            field=models.PositiveIntegerField(default=0, help_text='the visit of the step that asked: the seq of the checkpoint it started from'),
        ),
        migrations.AlterField(
            model_name='approvalrequest',
            name='ask',
            field=models.PositiveIntegerField(default=1, help_text='1 for the first ask at this place, 2 after asking again...'),
        ),
        migrations.AddConstraint(
            model_name='approvalrequest',
            constraint=models.UniqueConstraint(condition=models.Q(('status', 'PENDING')), fields=('run', 'step', 'visit', 'position'), name='approval_one_pending'),
        ),
        migrations.AddConstraint(
            model_name='approvalrequest',
            constraint=models.UniqueConstraint(fields=('run', 'step', 'visit', 'position', 'ask'), name='approval_run_step_ask'),
        ),
        # Rows last: on Postgres no schema change may follow an UPDATE of the table in the same transaction.
        migrations.RunSQL(VISIT_OF_EACH_REQUEST, migrations.RunSQL.noop),
        migrations.RunPython(mark_used, migrations.RunPython.noop),
    ]
