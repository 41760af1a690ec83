"""The report's account of the replication rounds: which claims stopped when, with how many seeds.

From ``tables/replication.parquet`` (:func:`bnstudy.replication.rounds.table`): for each
replicated experiment, one line per ledger row over its runs and one column per round it took
(its cumulative seeds in the header), each cell the row's verdict at that round after the
multiplicity adjustment, and a closing sentence per experiment: the round it stopped at and
why (every row decided, or the last planned round reached).
"""

from __future__ import annotations

import html

import pandas as pd

from bnstudy.claims.decide import outcomes as O


def _cell(r) -> str:
    v = O.outcome(str(r["adjusted_verdict"]))
    return f'<td class="v v-{v.replace(" ", "-")}">{html.escape(v)}</td>'


def context(df: pd.DataFrame | None) -> list[dict]:
    """``[{"experiment", "table" (HTML), "text"}]``, one per replicated experiment."""
    if df is None or df.empty:
        return []
    out = []
    for e, g in df.groupby("experiment", sort=True):
        rounds = g.drop_duplicates("round").sort_values("round")
        head = "".join(f"<th>round {int(r['round']) + 1}<br>{int(r['n_seeds'])} seeds</th>"
                       for _, r in rounds.iterrows())
        rows = g[g["claim_id"] != ""]
        body = []
        for (cid, where, norm), h in rows.groupby(["claim_id", "row_experiment", "norm"],
                                                  sort=True):
            cells = {int(r["round"]): _cell(r) for _, r in h.iterrows()}
            body.append(f'<tr><td class="l">{html.escape(cid)}</td><td class="l">'
                        f'{html.escape(f"{where}, {norm}")}</td>'
                        + "".join(cells.get(int(k), "<td></td>") for k in rounds["round"])
                        + "</tr>")
        last = rounds.iloc[-1]
        undecided = rows[(rows["round"] == last["round"])
                         & ~rows["adjusted_verdict"].map(O.outcome).isin(O.DECIDED)]
        why = ("every row over its runs decided" if undecided.empty else
               f"the last planned round reached with {len(undecided)} row(s) undecided"
               if not last["continue"] else "still going")
        text = (f"{e}: stopped after round {int(last['round']) + 1} at "
                f"{int(last['n_seeds'])} seeds ({why}).")
        added = [f"round {int(r['round']) + 2} to {r['next_norms'].replace(',', ', ')}"
                 for _, r in rounds.iterrows()
                 if r["continue"] and r.get("next_norms", "") not in ("", None)]
        if added:  # the arms the undecided rows compared (an arm no row reads gets none)
            text += f" Seeds added in {'; '.join(added)}."
        table = ('<table><tr><th class="l">claim</th><th class="l">row</th>' + head + "</tr>"
                 + "".join(body) + "</table>")
        out.append({"experiment": e, "table": table, "text": text})
    return out
