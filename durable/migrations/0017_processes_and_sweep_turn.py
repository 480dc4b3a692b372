"""The processes running against the database (durable/fleet.py) and the workers' sweep turns (durable/runtime/sweeper.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('durable', '0016_finished_runs_hold_no_retry_error'),
    ]

    operations = [
        migrations.CreateModel(
            name='SweepTurn',
            fields=[
                ('scope', models.CharField(max_length=40, primary_key=True, serialize=False)),
                ('due_at', models.DateTimeField()),
                ('taken_by', models.CharField(blank=True, max_length=255)),
            ],
        ),
        migrations.CreateModel(
            name='Process',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('web', 'Web'), ('worker', 'Worker')], max_length=10)),
                ('hostname', models.CharField(max_length=255)),
                ('pid', models.PositiveIntegerField()),
                ('started_at', models.DateTimeField()),
                ('last_seen', models.DateTimeField()),
                ('workflows', models.JSONField(default=list, help_text='the workflow versions it registered: ["name@version", ...]')),
            ],
            options={
                'indexes': [models.Index(fields=['-last_seen'], name='process_last_seen')],
                'constraints': [models.UniqueConstraint(fields=('hostname', 'pid'), name='process_host_pid')],
            },
        ),
    ]
