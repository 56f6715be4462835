"""A Flask application served to its own test client, request after request.

    python real_flask.py SECONDS

Debian's python3-flask (with werkzeug, jinja2, click, itsdangerous,
blinker; pure Python) runs an app with an HTML page rendered by
render_template_string (jinja2 compiles the template string at every
request: short-lived code again), a JSON API that decodes a posted body, and
a page that sets a signed session cookie. Flask's test client drives it
in-process, so the whole WSGI stack (werkzeug's request building, routing,
Flask's dispatch, response building) runs in this one thread. Prints "ready"
on stdout when the loop starts; exits 0 after SECONDS.
"""
import os
import random
import sys
import time

import flask

app = flask.Flask(__name__)
app.secret_key = "real_flask"

PAGE = """<html><body><h1>{{ title }}</h1>
<ul>{% for r in rows %}<li class="{{ loop.cycle('odd', 'even') }}">{{ r.name | e }}:
{{ "%.2f" | format(r.score) }}</li>{% endfor %}</ul>
<p>{{ rows | length }} rows, {{ rows | sum(attribute='score') | round(2) }}</p></body></html>"""


def rows(seed, n):
    rng = random.Random(seed)
    return [{"name": "".join(rng.choice("abcdefgh<&>") for _ in range(8)),
             "score": rng.random() * 100} for _ in range(n)]


@app.route("/page/<int:seed>")
def page(seed):
    # A new template source per seed bucket: compiled at every request.
    return flask.render_template_string(PAGE + f"<!-- {seed % 97} -->",
                                        title=f"page {seed}", rows=rows(seed, 30))


@app.route("/api/sum", methods=["POST"])
def api_sum():
    data = flask.request.get_json()
    total = sum(r["score"] for r in data["rows"])
    names = sorted(r["name"] for r in data["rows"])
    return flask.jsonify(total=total, names=names, n=len(names))


@app.route("/login/<name>")
def login(name):
    flask.session["user"] = name
    flask.session["visits"] = flask.session.get("visits", 0) + 1
    return flask.redirect(flask.url_for("page", seed=len(name)))


def main():
    seconds = float(sys.argv[1])
    client = app.test_client()
    deadline = time.monotonic() + seconds
    print("ready", flush=True)
    i = n = 0
    while time.monotonic() < deadline:
        i += 1
        r = client.get(f"/page/{i}")
        n += len(r.data)
        r = client.post("/api/sum", json={"rows": rows(i, 40)})
        n += r.get_json()["n"]
        r = client.get(f"/login/user{i % 13}")
        n += r.status_code
    print(f"{i} rounds, {n}", file=sys.stderr)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
