"""`worker dashboard`: a local web page over the same store the commands read (SQLite, or the
fleet's PostgreSQL), with live updates by server-sent events and the actions of `worker waits`
and `worker cancel` behind a token, a session and a CSRF check.

Needs the optional extra `worker[web]` (Starlette, uvicorn, Jinja2); nothing else imports it.
"""
