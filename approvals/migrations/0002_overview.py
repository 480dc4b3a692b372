# The overview's approvals decided in the last 24 hours, and their waits.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0001_initial'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='approvalrequest',
            index=models.Index(condition=models.Q(('decided_at__isnull', False)), fields=['decided_at'], name='approval_decided'),
        ),
    ]
