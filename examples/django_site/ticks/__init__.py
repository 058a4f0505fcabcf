"""The recipe's app: the ``Tick`` model, its jobs and ``manage.py tickwork``."""
