"""What every run costs (docs/workflows.md, "Model calls and budgets"): the tokens and cost of a run's model calls,
and its budget. The counters default to 0 in the database too (runs in flight start counting from their next model
call; the bench seeds runs with raw SQL), the budget to none. The operator and admin roles may raise a budget."""
from decimal import Decimal

from django.contrib.auth.management import create_permissions
from django.db import migrations, models


def grant_raise_budget(apps, schema_editor):
    """durable.roles.SPEND, to the roles that steer runs (0003_roles froze the roles as they were then)."""
    app_config = apps.get_app_config("durable")
    app_config.models_module = True  # permissions are normally created after all migrations; the roles need it now
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    raise_budget = Permission.objects.filter(content_type__app_label="durable", codename="raise_budget")
    for group in Group.objects.filter(name__in=["operator", "admin"]):
        group.permissions.add(*raise_budget)


class Migration(migrations.Migration):

    dependencies = [
        ('durable', '0020_trace'),
        ('auth', '0012_alter_user_first_name_max_length'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='run',
            options={'ordering': ['-created_at', '-id'], 'permissions': [('start_run', 'Can start runs'), ('cancel_run', 'Can cancel runs'), ('retry_run', 'Can retry runs now'), ('resume_run', 'Can resume runs'), ('migrate_run', 'Can migrate runs to a newer workflow version'), ('start_older_version', 'Can start a run on an older workflow version than the current one'), ('send_event', 'Can send events to runs'), ('raise_budget', 'Can raise the budget of a run stopped by it')]},
        ),
        migrations.AddField(
            model_name='run',
            name='budget_cost',
            field=models.DecimalField(blank=True, decimal_places=10, max_digits=20, null=True),
        ),
        migrations.AddField(
            model_name='run',
            name='budget_tokens',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='run',
            name='cost',
            field=models.DecimalField(db_default=Decimal('0'), decimal_places=10, default=Decimal('0'), help_text='of its priced model calls (DURABLE_LLM_PRICES)', max_digits=20),
        ),
        migrations.AddField(
            model_name='run',
            name='input_tokens',
            field=models.PositiveBigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='run',
            name='output_tokens',
            field=models.PositiveBigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='run',
            name='unpriced_tokens',
            field=models.PositiveBigIntegerField(db_default=0, default=0, help_text='of model calls whose model has no price: cost unknown'),
        ),
        migrations.RunPython(grant_raise_budget, migrations.RunPython.noop),
    ]
