"""durable's own API tokens: hashed, named, expiring, revocable.

DRF's authtoken kept each token in plaintext. Its rows, where the table exists, move here hashed by the
same rule as new tokens (the first 12 characters name the token, the sha256 of the whole token is kept),
so every client keeps working until its token expires (DURABLE_API_TOKEN_DAYS from now). When this project
no longer installs rest_framework.authtoken, nothing reads that table any more and it is emptied, so no
plaintext token stays behind; a project that still installs it for its own use keeps its rows.
The admin role may manage everyone's tokens (durable.manage_apitoken); frozen here, as migrations must be.
"""
import hashlib
from datetime import timedelta
from datetime import timezone as dt_timezone

import django.db.models.deletion
from django.apps import apps as installed
from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.db import migrations, models
from django.utils import timezone
from django.utils.dateparse import parse_datetime

OLD_TABLE = "authtoken_token"
PREFIX_LENGTH = 12


def move_drf_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("durable", "ApiToken")
    now = timezone.now()
    expires_at = now + timedelta(days=float(getattr(settings, "DURABLE_API_TOKEN_DAYS", 90)))
    quoted = schema_editor.quote_name(OLD_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {schema_editor.quote_name('key')}, user_id, created FROM {quoted}")
        old = cursor.fetchall()
    ApiToken.objects.bulk_create([
        ApiToken(user_id=user_id, name="moved from DRF authtoken", prefix=key[:PREFIX_LENGTH],
                 secret_hash=hashlib.sha256(key.encode()).hexdigest(), created_at=_aware(created) or now,
                 expires_at=expires_at)
        for key, user_id, created in old
    ])
    if not installed.is_installed("rest_framework.authtoken"):
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {quoted}")


def _aware(value):
    """A raw column's timestamp (a datetime or text, naive on SQLite: stored in UTC) as an aware datetime."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value, dt_timezone.utc)
    return value


def grant_admin_role(apps, schema_editor):
    app_config = apps.get_app_config("durable")
    app_config.models_module = True  # permissions are normally created after all migrations; the role needs it now
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    manage = Permission.objects.get(content_type__app_label="durable", codename="manage_apitoken")
    for group in Group.objects.filter(name="admin"):
        group.permissions.add(manage)


class Migration(migrations.Migration):

    dependencies = [
        ('durable', '0008_run_start_older_version'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('auth', '0012_alter_user_first_name_max_length'),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text='what it is for: the service or script that holds it', max_length=100)),
                ('prefix', models.CharField(help_text="the token's first characters: names it, grants nothing", max_length=12)),
                ('secret_hash', models.CharField(help_text='sha256 of the whole token, hex', max_length=64)),
                ('created_at', models.DateTimeField()),
                ('expires_at', models.DateTimeField()),
                ('last_used_at', models.DateTimeField(blank=True, help_text='updated at most once a minute', null=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('revoked_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'permissions': [('manage_apitoken', "Can create and revoke anyone's API tokens")],
                'indexes': [models.Index(fields=['prefix'], name='api_token_prefix'), models.Index(fields=['user', '-created_at'], name='api_token_user')],
            },
        ),
        migrations.RunPython(move_drf_tokens, migrations.RunPython.noop),
        migrations.RunPython(grant_admin_role, migrations.RunPython.noop),
    ]
