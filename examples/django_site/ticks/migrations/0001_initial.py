"""The ``Tick`` table (written by ``manage.py makemigrations``, then formatted)."""

from typing import ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    """Create ``ticks_tick``."""

    initial = True

    dependencies: ClassVar[list[tuple[str, str]]] = []

    operations: ClassVar[list[migrations.operations.base.Operation]] = [
        migrations.CreateModel(
            name="Tick",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("job", models.CharField(max_length=200)),
                ("slot", models.FloatField()),
                ("pid", models.IntegerField()),
                ("written", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("job", "slot"), name="one_row_per_slot")
                ],
            },
        ),
    ]
