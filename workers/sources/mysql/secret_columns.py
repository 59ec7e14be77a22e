"""Which output columns of a `query_mysql` SELECT read a secret column, whatever they are called
(docs/mysql.md "Secrets in rows").

The session masks a cell by the name of the column it reads (`SELECT password AS p`), which the
server reports only for a plain column of a table: a CTE's or a derived table's column, a UNION
after its first branch, a subquery or a function over a secret column came out under a name of
no secret (`SELECT x FROM (SELECT password AS x FROM accounts) d`, `JSON_OBJECT('p', password)`)
and was shown. So the guard follows each output column to the columns it reads, by name (a
column of a secret's name, or a name some SELECT of the statement gives to an expression
reading one), through every SELECT of the statement, and the session masks what it finds
(`OutputMasks.modes`, with the fetched value's type at hand):

- an output column that is an expression over a secret (`CONV(HEX(password), 16, 10)`,
  `ASCII(password)`): every value but NULL, numbers too (a secret's text turns into numbers);
- a plain column of such a name: its text, as for a table's column (`COUNT(*) AS
  password_resets` is evidence);
- `*`: its columns by name.

Not followed: a plain `COUNT([DISTINCT] col)` and `col IS [NOT] NULL` (how many, whether set,
which a WHERE can tell anyway), and names whose last word is a time (`token_expires_at`).
Conditions, ORDER BY and GROUP BY are oracles no output masking closes (`WHERE password LIKE
'a%'`): docs/mysql.md says so. Names are matched without their qualifier, so a column that
shares a name with such an expression elsewhere in the statement is masked too (more, never
less).
"""

from __future__ import annotations

from typing import Final

import msgspec
from sqlglot import exp

from workers.sources.logs.masking import log_secret_name

__all__ = ["NO_MASKS", "OutputMasks", "secret_outputs"]


def _counted(column: exp.Column) -> bool:
    """`COUNT([DISTINCT] col)` or `col IS [NOT] NULL`: how many, whether set. Anything more
    inside (`COUNT(IF(password LIKE 'a%', 1, NULL))`) is a test of the text, followed."""
    parent = column.parent
    if isinstance(parent, exp.Distinct):
        parent = parent.parent
    if isinstance(parent, exp.Count):
        return True
    return (
        isinstance(parent, exp.Is)
        and parent.this is column
        and isinstance(parent.expression, exp.Null)
    )


# A name of a secret whose last word says it holds a time (`token_expires_at`,
# `password_changed_on`): when a token expires is evidence, not a secret, and so is its MAX.
_TIME_WORDS: Final = frozenset("at on date day time timestamp ts until since".split())


def _secret(name: str) -> bool:
    words = name.lower().replace("-", "_").split("_")
    return log_secret_name(name) and words[-1] not in _TIME_WORDS


def _followed(node: exp.Expr) -> list[exp.Column]:
    """The columns `node` reads, but a plain COUNT or IS [NOT] NULL of one, and not `t.*`."""
    return [
        column
        for column in node.find_all(exp.Column)
        if not isinstance(column.this, exp.Star) and not _counted(column)
    ]


def _plain(node: exp.Expr, column: exp.Column) -> bool:
    return (node.unalias() if isinstance(node, exp.Alias) else node) is column


def _reads(node: exp.Expr, names: dict[str, bool]) -> bool | None:
    """None when `node` reads no secret; else whether it must be masked whole (numbers too)."""
    found: bool | None = None
    for column in _followed(node):
        whole = names.get(column.name.lower())
        if whole is not None:
            found = bool(found) or whole or not _plain(node, column)
    return found


def _branches(root: exp.Expr) -> list[exp.Select]:
    while isinstance(root, exp.Subquery):
        root = root.this
    if isinstance(root, exp.SetOperation):
        return _branches(root.left) + _branches(root.right)
    return [root] if isinstance(root, exp.Select) else []


def _output_name(expression: exp.Expr) -> str:
    """The name the server gives a select-list item: its alias, a column's name, else ""
    (its text; sqlglot's `alias_or_name` says `password` for `CAST(password AS CHAR)`)."""
    if isinstance(expression, exp.Alias):
        return expression.alias.lower()
    if isinstance(expression, exp.Column):
        return expression.name.lower()
    return ""


def _column_lists(root: exp.Expr) -> list[tuple[exp.Expr, list[str]]]:
    """The query of a CTE or derived table with a column list, `c(x, y)`, and its names."""
    out = []
    for alias in root.find_all(exp.TableAlias):
        listed = [c.name.lower() for c in alias.args.get("columns") or []]
        holder = alias.parent
        if listed and isinstance(holder, exp.CTE | exp.Subquery):
            out.append((holder.this, listed))
    return out


def _over_star(root: exp.Expr) -> list[str]:
    """The names of a column list over a `*` (`WITH c(a, b) AS (SELECT * FROM t)`): which
    column each names is the table's order, unknown here, so each may be a secret."""
    return [
        name
        for query, listed in _column_lists(root)
        if any(
            isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
            for branch in _branches(query)
            for e in branch.expressions
        )
        for name in listed
    ]


def _named(root: exp.Expr) -> list[tuple[exp.Expr, str]]:
    """(expression, the name the server gives what it yields) for every expression of the
    statement that yields a column: a SELECT's list (a later UNION branch's under the first
    branch's names; a CTE's or derived table's under its column list, `c(x)`), a JSON_TABLE's
    document under each of its columns. An unnamed expression's name is "" (the server names
    it by its text)."""
    pairs: list[tuple[exp.Expr, str]] = []
    for select in root.find_all(exp.Select):
        pairs.extend((e, _output_name(e)) for e in select.expressions)
    for operation in root.find_all(exp.SetOperation):
        branches = _branches(operation)
        names = [_output_name(e) for e in branches[0].expressions] if branches else []
        for branch in branches[1:]:
            pairs.extend(zip(branch.expressions, names, strict=False))
    for query, listed in _column_lists(root):
        for branch in _branches(query):
            pairs.extend(zip(branch.expressions, listed, strict=False))
    for table in root.find_all(exp.JSONTable):
        pairs.extend((table.this, c.name.lower()) for c in table.find_all(exp.JSONColumnDef))
    return pairs


def secret_outputs(root: exp.Expr) -> OutputMasks:
    """(position, whole) of the top SELECT's output columns that read a secret, and (name,
    whole) of the names given to such expressions anywhere (what a `*` shows them as; "*"
    when one has no name: then every label of a secret's name, whole)."""
    pairs = _named(root)
    # name read -> (name given, whether the expression is more than that plain column)
    edges: dict[str, list[tuple[str, bool]]] = {}
    secrets: list[str] = []
    for expression, given in pairs:
        for column in _followed(expression):
            name = column.name.lower()
            if _secret(column.name):
                secrets.append(name)
            if given:
                edges.setdefault(name, []).append((given, not _plain(expression, column)))
    secrets.extend(_over_star(root))
    names = _spread(dict.fromkeys(secrets, False), edges)
    if any(not given and _reads(e, names) is not None for e, given in pairs):
        # Named by its text (`ASCII(password)`), which a `*` or a quoted name reads: every
        # name of a secret is then taken whole, numbers too.
        names = _spread(dict.fromkeys(secrets, True), edges)
        names["*"] = True
    positions: dict[int, bool] = {}
    for branch in _branches(root):
        for index, expression in enumerate(branch.expressions):
            reads = _reads(expression, names)
            if reads is not None:
                positions[index] = positions.get(index, False) or reads
    if not positions and not names:
        return NO_MASKS
    return OutputMasks(
        positions=tuple(sorted(positions.items())), names=tuple(sorted(names.items()))
    )


def _spread(names: dict[str, bool], edges: dict[str, list[tuple[str, bool]]]) -> dict[str, bool]:
    """From the secret columns along the names given to what reads them (a CTE read by a
    derived table read by the top SELECT ...): each name is set at most twice, so linear."""
    pending = list(names)
    while pending:
        name = pending.pop()
        for given, expression in edges.get(name, ()):
            whole = names[name] or expression
            before = names.get(given)
            if before is None or (whole and not before):
                names[given] = whole or bool(before)
                pending.append(given)
    return names


class OutputMasks(msgspec.Struct, frozen=True, kw_only=True):
    """What `secret_outputs` found: (position, whole) and, for a `*`, (name, whole)."""

    positions: tuple[tuple[int, bool], ...] = ()
    names: tuple[tuple[str, bool], ...] = ()
    # A diagnostic view's statement columns (`GuardedQuery.cleaned`): fetched as the server
    # wrote them, for `diagnostics.clean_cell` (which masks after taking the literals out).
    raw: tuple[int, ...] = ()

    def modes(self, columns: list[str]) -> list[int]:
        """Per result column: 0 as the session decides, 1 its text masked, 2 every value but
        NULL masked (an expression over a secret), 3 its text unmasked for `clean_cell`."""
        at = dict(self.positions)
        by_name = dict(self.names)
        out = []
        for index, column in enumerate(columns):
            if index in self.raw:
                out.append(3)
                continue
            whole = at.get(index, by_name.get(column.lower()))
            if whole is None and "*" in by_name and log_secret_name(column):
                whole = True
            out.append(0 if whole is None else 2 if whole else 1)
        return out


NO_MASKS: Final = OutputMasks()
