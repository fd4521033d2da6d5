"""Where the person on call reads what to do: each DAG's runbook page in docs/runbooks/.

A failure message that asks the operator to act names its runbook section by the Markdown source's path
(`docs/runbooks/dr_failover.md#...`): it reads the same in a task log, a terminal and an alert, and every clone has
it. A DAG's doc_md links the built site, which the DR page serves at /kafka-dr/docs/ once `make docs` built it.
tests/docs checks that every page and section named here and in the code exists.
"""

from __future__ import annotations

RUNBOOKS_DIR = "docs/runbooks"
SITE_PATH = "/kafka-dr/docs"  # the DR page's route for the built site (kafka_dr.dashboard.app)


def runbook(dag_id: str, section: str = "") -> str:
    """`docs/runbooks/<dag_id>.md`, with `#<section>` (a heading's anchor) when given."""
    return f"{RUNBOOKS_DIR}/{dag_id}.md" + (f"#{section}" if section else "")


def see_runbook(dag_id: str, section: str = "") -> str:
    """What a failure message ends with when it asks a person to act: `see docs/runbooks/<dag_id>.md#<section>`."""
    return f"see {runbook(dag_id, section)}"


def runbook_doc_md(dag_id: str, doc: str | None) -> str:
    """A DAG's doc_md: its module docstring, then a link to its runbook on the DR page's copy of the site."""
    link = f"**Runbook:** [{dag_id}]({site_url(runbook(dag_id))}) (source: `{runbook(dag_id)}`)"
    return f"{(doc or '').strip()}\n\n{link}\n"


def site_url(source: str) -> str:
    """The DR page's link to a docs page named by its Markdown source: `docs/runbooks/x.md#s` is
    /kafka-dr/docs/runbooks/x/#s (mkdocs's directory URLs)."""
    page, _, section = source.partition("#")
    path = page.removeprefix("docs/").removesuffix(".md")
    return f"{SITE_PATH}/{path}/" + (f"#{section}" if section else "")
