"""``lake.sql_shell``: statements split on semicolons outside quotes and comments; the shell loop."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from lbreplay.lake.sql_shell import PROMPT, shell, split_statements, statements_of


def test_split_on_semicolons_outside_quotes_and_comments() -> None:
    text = ("SELECT 'a;b', \"c;d\", `e;f``;` FROM t; -- x; y\nSELECT 'it\\'s;' /* ; */ AS q;;"
            " /* only a comment; */ ; SELECT 3")
    done, rest = split_statements(text)
    assert done == ["SELECT 'a;b', \"c;d\", `e;f``;` FROM t", "-- x; y\nSELECT 'it\\'s;' /* ; */ AS q"]
    assert rest == " SELECT 3"
    assert statements_of(text)[-1] == "SELECT 3"
    assert split_statements("SELECT 'open;") == ([], "SELECT 'open;")  # an unterminated quote holds the rest
    assert statements_of(" ; -- nothing\n") == []


@given(st.lists(st.text(alphabet="ab ;'\"`-/*\n", max_size=12), max_size=4))
def test_quoted_literals_keep_their_semicolons(parts: list[str]) -> None:
    """Each statement a string literal holding any text (quotes escaped): the split gives the statements back."""
    statements = ["SELECT '" + p.replace("\\", "\\\\").replace("'", "\\'") + "'" for p in parts]
    assert statements_of("; ".join(statements)) == statements


def test_shell_prompts_only_on_a_terminal_and_stops_at_quit() -> None:
    ran: list[str] = []
    out = io.StringIO()
    ok = shell(lambda s: ran.append(s) or s != "bad", ["SELECT 1;\n", "bad;\n", "SELECT\n", "2;\n", ".quit\n",
                                                          "SELECT 3;\n"], out, interactive=True)
    assert ran == ["SELECT 1", "bad", "SELECT\n2"] and not ok
    assert out.getvalue().startswith(PROMPT) and "      -> " in out.getvalue()
    out = io.StringIO()
    assert shell(lambda s: ran.append(s) or True, ["SELECT 4"], out, interactive=False)
    assert ran[-1] == "SELECT 4" and out.getvalue() == ""
