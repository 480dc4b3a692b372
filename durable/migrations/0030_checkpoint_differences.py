"""Checkpoints store what changed (issue 38): `delta` and `base` added, `state` NULL on a difference's row.

Existing rows keep their whole state (base NULL): they read as full checkpoints, so runs in flight across the
upgrade resume from them unchanged.
"""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("durable", "0029_pause"),
    ]

    operations = [
        migrations.AlterField(
            model_name="checkpoint",
            name="state",
            field=models.JSONField(blank=True, help_text="the whole state; NULL when `delta` holds it", null=True),
        ),
        migrations.AddField(
            model_name="checkpoint",
            name="delta",
            field=models.JSONField(blank=True, help_text="what changed since the checkpoint before", null=True),
        ),
        migrations.AddField(
            model_name="checkpoint",
            name="base",
            field=models.PositiveIntegerField(blank=True, help_text="the full checkpoint a difference builds on",
                                              null=True),
        ),
    ]
