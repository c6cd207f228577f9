"""Rich rendering of results for the CLI (B7's confidence line, D6's refusal styling)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.runtime_store import StoredAnswer
from ragsift.schemas import DeadLetter, Decision, Report, RetrievalResult
from ragsift.workers.decision import LABEL_SAMPLE_FLAG

if TYPE_CHECKING:
    from ragsift.evaluation import ScorerReport

__all__ = [
    "breakdown_table",
    "confidence_line",
    "demo_table",
    "eval_table",
    "fmt_number",
    "orders_words",
    "print_answer_extras",
    "print_assessment",
    "print_decision",
    "print_report",
    "print_result",
    "spread_words",
]

#: C6 badge colours, in Rich's names
_BADGE_STYLES = {"green": "green", "orange": "dark_orange", "red": "red"}

_MARKERS = {
    "high_confidence": ("●", "green", "HIGH"),
    "medium_confidence": ("◐", "yellow", "MEDIUM"),
    "low_confidence": ("○", "dark_orange", "LOW"),
    "no_relevant_context": ("✕", "red", "NONE"),
}


def confidence_line(result: RetrievalResult) -> Text:
    """B7: ``● HIGH confidence 0.91 (calibrated) · kept 3/8``."""
    if result.outcome == "error":
        return Text(
            "✕ ERROR retrieval failed: " + (result.error.message if result.error else ""),
            style="bold red",
        )
    if result.outcome in ("greeting", "scope"):
        return Text(f"↷ {result.outcome}: answered without retrieval", style="cyan")
    marker, colour, label = _MARKERS[result.status]
    text = Text(f"{marker} {label} ", style=f"bold {colour}")
    text.append(f"confidence {result.confidence:.2f} ({result.breakdown.scorer})")
    text.append(f" · kept {result.match_count}/{result.total_found}")
    if result.status == "no_relevant_context" and result.match_count:
        text.append(", none relevant enough to use")
    if result.cache.hit:
        text.append(" · cached", style="dim")
    if result.advisory_only:
        text.append(" · advisory only", style=colour)
    return text


def _answer(result: RetrievalResult) -> Text:
    if result.answer_hint:
        return Text(result.answer_hint)
    if not result.answerable or not result.hits:
        return Text(REFUSAL_SENTENCE, style="italic red")
    best = result.hits[0]
    return Text(f"{best.text[:160]}… [{best.citation.source}]")


def _answer_title(result: RetrievalResult) -> str:
    # An answered result's panel shows the top hit's first characters, often from
    # inside a sentence (chunks overlap); the answer is the report's, printed after.
    if result.answer_hint:
        return "answer"
    return "top hit" if result.answerable and result.hits else "refusal"


def print_result(console: Console, result: RetrievalResult | DeadLetter) -> None:
    """One result in full: the confidence line, disclaimer, hits, drops, advice."""
    if isinstance(result, DeadLetter):
        console.print(Text.assemble(("rejected", "red"), f" at {result.stage}: {result.error}"))
        return
    console.print(confidence_line(result))
    if result.disclaimer:
        console.print(Panel(Text(result.disclaimer), title="disclaimer", border_style="yellow"))
    console.print(
        Panel(
            _answer(result),
            title=_answer_title(result),
            border_style="green" if result.answerable else "red",
        )
    )
    if result.hits:
        # With no_relevant_context the hits passed the similarity filter but the
        # confidence says none of them is relevant: calling them "kept context" under
        # a "no relevant context" disclaimer would contradict it.
        title = (
            "retrieved, judged not relevant (not used to answer)"
            if result.status == "no_relevant_context"
            else "kept context"
        )
        table = Table("#", "score", "source", "text", title=title)
        for h in result.hits:
            table.add_row(str(h.rank), f"{h.score:.2f}", h.citation.source, h.text[:90])
        console.print(table)
    if result.dropped:
        drops = ", ".join(f"{d.chunk_id} ({d.rule} {d.value:.2f})" for d in result.dropped[:6])
        console.print(Text(f"dropped {result.filtered_count}: {drops}", style="dim"))
    for advice in result.recommendations:
        console.print(Text.assemble((f"→ {advice.code}", "cyan"), f": {advice.message}"))
    console.print(Text(f"query_id {result.query_id} · result {result.result_id}", style="dim"))


def demo_table(rows: list[tuple[str, RetrievalResult | DeadLetter, int]]) -> Table:
    """The demo's summary: one row per scripted query."""
    table = Table(
        "kind",
        "query",
        "confidence",
        "level",
        "kept/filtered",
        "stop",
        "cache",
        "answer",
        "evidence",
        title="ragsift demo — embedded runtime",
        show_lines=False,
    )
    for kind, result, evidence in rows:
        if isinstance(result, DeadLetter):
            table.add_row(kind, "-", "-", "rejected", "-", "-", "-", result.error[:40], "-")
            continue
        marker, colour, label = _MARKERS[result.status]
        level = (
            Text(result.outcome, style="cyan")
            if result.outcome != "ok"
            else Text(f"{marker} {label}", style=colour)
        )
        answer = (
            Text(result.outcome, style="cyan")
            if result.outcome in ("greeting", "scope")
            else Text("answer", style="green")
            if result.answerable
            else Text("refuse", style="red")
        )
        table.add_row(
            kind,
            result.query[:44],
            f"{result.confidence:.2f}",
            level,
            f"{result.match_count}/{result.filtered_count}",
            result.stop_reason if result.outcome == "ok" else "-",
            "hit" if result.cache.hit else "miss",
            answer,
            str(evidence),
        )
    return table


def print_report(console: Console, report: Report) -> None:
    """The report a user reads: C6 badge and banner, the answer or the D6 refusal, sources."""
    colour = _BADGE_STYLES[report.badge]
    title = Text.assemble(
        ("REFUSED" if report.is_refusal else "report", f"bold {colour}"),
        f" · {report.badge} badge · {report.level} · {report.generated_by}",
    )
    body = Text(report.answer, style="italic red" if report.is_refusal else "")
    if report.banner:
        body = Text.assemble((report.banner + "\n", f"bold {colour}"), body)
    if report.citations:
        sources = ", ".join(dict.fromkeys(c.source for c in report.citations))
        body.append(f"\nsources: {sources}", style="dim")
    if report.disclaimer and report.disclaimer not in report.answer:
        body.append(f"\n{report.disclaimer}", style="yellow")
    console.print(Panel(body, title=title, border_style=colour))


def print_decision(console: Console, decision: Decision) -> None:
    """C5's use/skip decision and B3's review routing, in one line."""
    use = ("use context", "green") if decision.use_context else ("do not use context", "red")
    line = Text.assemble("decision: ", use, f" — {decision.reason}")
    if decision.review_queue:
        line.append(" · review queue ")
        line.append(decision.review_queue, style="bold")
    if LABEL_SAMPLE_FLAG in decision.flags:  # RAGSIFT_FEEDBACK_SAMPLE_SHARE chose it
        line.append(" · sampled for a label: ")
        line.append(f"ragsift feedback {decision.query_id} --relevant|--not-relevant", style="bold")
    console.print(line)


def breakdown_table(result: RetrievalResult) -> Table:
    """B4: the signals behind the confidence."""
    table = Table("signal", "value", title=f"breakdown ({result.breakdown.scorer})")
    for name, value in result.breakdown.signals.items():
        table.add_row(name, f"{value:.3f}")
    return table


def print_answer_extras(
    console: Console, outcome: StoredAnswer | DeadLetter, data_dir: Path | None
) -> None:
    """After ``ask``'s result: the report, the decision, and how to come back to it."""
    if isinstance(outcome, DeadLetter):
        return
    if outcome.report is not None:
        print_report(console, outcome.report)
    if outcome.decision is not None:
        print_decision(console, outcome.decision)
    # Quoted as a shell reads it: a path with a space could not be pasted back.
    where = f" --data-dir {shlex.quote(str(data_dir))}" if data_dir is not None else ""
    console.print(
        Text(f"come back to it: ragsift assess{where} {outcome.result.query_id}", style="dim")
    )


def print_assessment(console: Console, answer: StoredAnswer) -> None:
    """``assess``: the result in full, its breakdown, and its report and decision if any."""
    print_result(console, answer.result)
    console.print(breakdown_table(answer.result))
    if answer.report is not None:
        print_report(console, answer.report)
    if answer.decision is not None:
        print_decision(console, answer.decision)


def fmt_number(value: float | None) -> str:
    """Three decimals, or a dash for a missing or NaN figure."""
    return "—" if value is None or value != value else f"{value:.3f}"  # NaN != NaN


def eval_table(reports: Sequence[ScorerReport], alpha: float, title: str) -> Table:
    """``ragsift eval``'s table: one row per scorer, its risk with the 95% interval, its
    ECE beside the ECE a perfectly calibrated scorer would reach by chance (95%)."""
    table = Table(
        "scorer",
        "AUROC",
        "ECE",
        "cov@p90",
        "cov@p95",
        "AURC",
        "answer rate",
        "risk",
        f"risk <= {alpha}",
        "refusal P",
        "refusal R",
        "near-miss refused",
        "near-miss AUROC",
        "rule",
        title=title,
    )
    for r in reports:
        interval = "" if r.risk_interval is None else " [{:.2f}-{:.2f}]".format(*r.risk_interval)
        table.add_row(
            r.name,
            fmt_number(r.auroc),
            f"{fmt_number(r.ece)} (chance {fmt_number(r.ece_by_chance)})",
            fmt_number(r.coverage_at_p90),
            fmt_number(r.coverage_at_p95),
            fmt_number(r.aurc),
            f"{fmt_number(r.answer_rate)} ({r.answered})",
            fmt_number(r.risk) + interval,
            r.target,
            fmt_number(r.refusal_precision),
            fmt_number(r.refusal_recall),
            fmt_number(r.near_miss_refusal_rate),
            fmt_number(r.near_miss_auroc),
            r.rule,
        )
    return table


def spread_words(spread: dict[str, Any], over: str) -> str:
    """What was served over many draws or orders (``eval --feedback-draws``,
    ``--arrival-orders``): the answer rate's and the risk's median and 10th-90th
    percentiles, the largest risk, and how often it was over alpha."""
    rate, risk = spread["answer_rate"], spread["risk"]
    risked = (
        f"nothing answered in any of the {over}"
        if risk is None
        else f"risk median {risk['p50']:.3f} ({risk['p10']:.3f}-{risk['p90']:.3f},"
        f" largest {risk['p100']:.3f})"
    )
    return (
        f"answer rate median {rate['p50']:.3f} ({rate['p10']:.3f}-{rate['p90']:.3f}),"
        f" {risked}; risk over alpha in {spread['risk_over_alpha']:.0%} of the {over}"
    )


def orders_words(orders: dict[str, Any]) -> str:
    """``eval --arrival-orders``: the calibrated answers as served over the orders."""
    return (
        f"as served over {orders['orders']} arrival orders: {spread_words(orders, 'orders')},"
        f" over alpha + 0.03 in {orders['risk_over_target']:.0%}"
    )
