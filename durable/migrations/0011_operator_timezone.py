# Each operator's time zone for the console; the journal records a step's reuse of recorded activity results.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('durable', '0010_active_business_key'),
    ]

    operations = [
        migrations.CreateModel(
            name='OperatorPreferences',
            fields=[
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='durable_preferences', serialize=False, to=settings.AUTH_USER_MODEL)),
                ('time_zone', models.CharField(help_text='IANA time zone name, e.g. Europe/Paris', max_length=64)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'verbose_name_plural': 'operator preferences',
            },
        ),
        migrations.AlterField(
            model_name='journalentry',
            name='kind',
            field=models.CharField(choices=[('activity', 'Activity'), ('retry_scheduled', 'Retry Scheduled'), ('failed', 'Failed'), ('replay_violation', 'Replay Violation'), ('contract_blocked', 'Contract Blocked'), ('operator', 'Operator'), ('side_effect', 'Side Effect'), ('duplicate_prevented', 'Duplicate Prevented'), ('reconciliation', 'Reconciliation'), ('needs_attention', 'Needs Attention'), ('approval', 'Approval'), ('activity_reused', 'Activity Reused')], max_length=30),
        ),
    ]
