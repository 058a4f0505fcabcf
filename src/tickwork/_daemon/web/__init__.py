"""The daemon's HTTP surface: the pages, the JSON API, the probes and the servers they run on.

`webapp.WebApp` answers every request; `http` serves it on the standard library's server,
`gateways` behind ASGI, WSGI and Django; `api` and `openapi` are the control API,
`httpauth` who may use it; `status_page`, `job_page`, `oneoff_page` and `charts` draw the
pages; `joblist` is what the state says about the jobs, as rows for programs.
"""
