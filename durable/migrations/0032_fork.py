"""Fork from any checkpoint (docs/workflows.md, "Retry, resume or fork"): a run's origin, the checkpoint it forked
and its family's first run, and the fork_run permission for the roles that steer runs."""
import django.db.models.deletion
from django.contrib.auth.management import create_permissions
from django.db import migrations, models


def grant_fork_run(apps, schema_editor):
    """durable.fork_run to the roles that steer runs (0003_roles froze the roles as they were then)."""
    app_config = apps.get_app_config("durable")
    app_config.models_module = True  # permissions are normally created after all migrations; the roles need it now
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    fork_run = Permission.objects.filter(content_type__app_label="durable", codename="fork_run")
    for group in Group.objects.filter(name__in=["operator", "admin"]):
        group.permissions.add(*fork_run)


class Migration(migrations.Migration):

    dependencies = [
        ('durable', '0031_schedules'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='run',
            options={'ordering': ['-created_at', '-id'], 'permissions': [('start_run', 'Can start runs'), ('cancel_run', 'Can cancel runs'), ('retry_run', 'Can retry runs now'), ('resume_run', 'Can resume runs'), ('migrate_run', 'Can migrate runs to a newer workflow version'), ('start_older_version', 'Can start a run on an older workflow version than the current one'), ('send_event', 'Can send events to runs'), ('raise_budget', 'Can raise the budget of a run stopped by it'), ('pause_run', 'Can pause and resume runs, and every run of a workflow at once'), ('fork_run', 'Can start a new run from a checkpoint of any run (a fork)')]},
        ),
        migrations.AddField(
            model_name='run',
            name='family_root',
            field=models.UUIDField(blank=True, help_text='the first run of its family, when a fork', null=True),
        ),
        migrations.AddField(
            model_name='run',
            name='forked_at_seq',
            field=models.PositiveIntegerField(blank=True, help_text="the origin's checkpoint it forked", null=True),
        ),
        migrations.AddField(
            model_name='run',
            name='forked_from',
            field=models.ForeignKey(blank=True, help_text='the run this one was forked from (durable.forks.fork_run)', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='forks', to='durable.run'),
        ),
        migrations.RunPython(grant_fork_run, migrations.RunPython.noop),
    ]
