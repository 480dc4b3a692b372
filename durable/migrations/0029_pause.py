"""Pause and resume (docs/operations.md, "Pausing runs"): the PAUSED status, a run's pause request and reason, the
kill switch of a workflow (version), and the pause_run permission for the roles that steer runs."""
import django.db.models.deletion
from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

import durable.engine.states


def grant_pause_run(apps, schema_editor):
    """durable.pause_run to the roles that steer runs (0003_roles froze the roles as they were then)."""
    app_config = apps.get_app_config("durable")
    app_config.models_module = True  # permissions are normally created after all migrations; the roles need it now
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    pause_run = Permission.objects.filter(content_type__app_label="durable", codename="pause_run")
    for group in Group.objects.filter(name__in=["operator", "admin"]):
        group.permissions.add(*pause_run)


class Migration(migrations.Migration):

    dependencies = [
        ('durable', '0028_stream_chunks'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='run',
            options={'ordering': ['-created_at', '-id'], 'permissions': [('start_run', 'Can start runs'), ('cancel_run', 'Can cancel runs'), ('retry_run', 'Can retry runs now'), ('resume_run', 'Can resume runs'), ('migrate_run', 'Can migrate runs to a newer workflow version'), ('start_older_version', 'Can start a run on an older workflow version than the current one'), ('send_event', 'Can send events to runs'), ('raise_budget', 'Can raise the budget of a run stopped by it'), ('pause_run', 'Can pause and resume runs, and every run of a workflow at once')]},
        ),
        migrations.AddField(
            model_name='run',
            name='pause_reason',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
        migrations.AddField(
            model_name='run',
            name='pause_requested_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='run',
            name='paused_by_switch',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name='run',
            name='status',
            field=models.CharField(choices=[('PENDING', 'Pending'), ('RUNNING', 'Running'), ('WAITING_APPROVAL', 'Waiting approval'), ('WAITING_RETRY', 'Waiting retry'), ('WAITING', 'Waiting'), ('NEEDS_ATTENTION', 'Needs attention'), ('BLOCKED_VERSION', 'Blocked version'), ('SUCCEEDED', 'Succeeded'), ('FAILED', 'Failed'), ('CANCELLED', 'Cancelled'), ('PAUSED', 'Paused')], default=durable.engine.states.RunStatus['PENDING'], max_length=20),
        ),
        migrations.CreateModel(
            name='PauseSwitch',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('workflow_name', models.CharField(max_length=100)),
                ('workflow_version', models.PositiveIntegerField(default=0, help_text='0: every version')),
                ('reason', models.TextField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['workflow_name', 'workflow_version'],
                'constraints': [models.UniqueConstraint(fields=('workflow_name', 'workflow_version'), name='pause_switch_one_per_version')],
            },
        ),
        migrations.RunPython(grant_pause_run, migrations.RunPython.noop),
    ]
