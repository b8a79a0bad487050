"""`python -m app dev`: the whole bot on one machine, on embedded Postgres and Redis, with a
browser playground that stands in for Discord. Never imported by the production processes."""
