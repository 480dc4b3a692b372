"""Create the console's roles as groups. The permissions are frozen here, as migrations must be;
durable/roles.py is the live definition, and a test keeps the two equal."""
from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEW = (
    "durable.view_run", "durable.view_checkpoint", "durable.view_journalentry", "durable.view_sideeffect",
    "durable.view_operatoraction", "approvals.view_approvalrequest", "approvals.view_approvaldecision",
)
DECIDE = ("approvals.decide_approvalrequest",)
RESOLVE = ("durable.resolve_sideeffect",)
STEER = ("durable.start_run", "durable.cancel_run", "durable.retry_run", "durable.resume_run", "durable.migrate_run")
ROLES = {
    "viewer": VIEW,
    "approver": VIEW + DECIDE,
    "reconciler": VIEW + RESOLVE,
    "operator": VIEW + STEER,
    "admin": VIEW + DECIDE + RESOLVE + STEER,
}


def create_roles(apps, schema_editor):
    # Permissions are normally created after all migrations; roles need them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, names in ROLES.items():
        group, _ = Group.objects.get_or_create(name=role)
        wanted = [tuple(name.split(".")) for name in names]
        perms = [Permission.objects.get(content_type__app_label=app, codename=codename) for app, codename in wanted]
        group.permissions.set(perms)


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=list(ROLES)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("durable", "0002_alter_journalentry_kind"),
        ("approvals", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(create_roles, remove_roles)]
