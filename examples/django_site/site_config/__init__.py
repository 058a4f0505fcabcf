"""The Django recipe's project package: settings, URLs, the WSGI application."""
