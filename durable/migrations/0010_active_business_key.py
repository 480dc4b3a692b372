# At most one active run per workflow and business key, for workflows that declare it (on_active_business_key).

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('durable', '0009_api_tokens'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='one_active_per_business_key',
            field=models.BooleanField(db_default=False, default=False, help_text='its workflow allows one active run per business key (on_active_business_key)'),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.UniqueConstraint(condition=models.Q(('one_active_per_business_key', True), models.Q(('status__in', ['CANCELLED', 'FAILED', 'SUCCEEDED']), _negated=True)), fields=('workflow_name', 'business_key'), name='run_one_active_per_business_key'),
        ),
    ]
