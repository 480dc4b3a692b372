"""The webhook role (durable/roles.py, WEBHOOK): a webhook's service account sends events to runs and reads the
status of the runs it sent events to, nothing else. Its permissions are frozen here, as migrations must be."""
from django.contrib.auth.management import create_permissions
from django.db import migrations

WEBHOOK = ("durable.send_event",)


def create_webhook_role(apps, schema_editor):
    app_config = apps.get_app_config("durable")
    app_config.models_module = True  # permissions are normally created after all migrations; the role needs them now
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="webhook")
    group.permissions.set([Permission.objects.get(content_type__app_label="durable", codename=name.split(".")[1])
                           for name in WEBHOOK])


def remove_webhook_role(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="webhook").delete()


class Migration(migrations.Migration):

    dependencies = [
        ("durable", "0025_limits"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_webhook_role, remove_webhook_role)]
