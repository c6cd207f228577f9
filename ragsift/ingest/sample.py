"""The demo's sample corpus: a fictional company handbook ragsift writes itself.

Lumenary Labs and its Orbit thermostat are invented; any resemblance to a real
product is an accident. The corpus is small enough to index in a second and
varied enough that in-scope, borderline and out-of-scope questions behave
differently.
"""

from __future__ import annotations

from pathlib import Path

from ragsift.ingest.loaders import SourceDocument

__all__ = [
    "DEMO_ASK",
    "DEMO_QUERIES",
    "SAMPLE_DOCUMENTS",
    "DemoQuery",
    "sample_documents",
    "write_sample_corpus",
]

SAMPLE_DOCUMENTS: dict[str, tuple[str, str]] = {
    # file name: (source_type, text)
    "returns-and-refunds.md": (
        "internal",
        """# Returns and refunds

Customers may return an Orbit thermostat within 30 days of delivery for a full
refund, provided the device is undamaged and all accessories are included.
Refunds are issued to the original payment method within 5 business days after
the returned device reaches our Rotterdam warehouse.

Subscriptions to Orbit Insights can be cancelled at any time. A cancelled
subscription stays active until the end of the current billing month; partial
months are not refunded. Annual plans cancelled within 14 days of purchase are
refunded in full.

Opened software licences and gift cards cannot be returned.
""",
    ),
    "warranty.md": (
        "internal",
        """# Hardware warranty

Every Orbit thermostat carries a 2-year limited warranty from the date of
delivery. The warranty covers defects in materials and workmanship. It does not
cover damage from incorrect wiring, water, power surges or unauthorised repair.

To make a warranty claim, open a support ticket with the device serial number
(printed on the back plate, starting with ORB-) and a photo of the wiring.
Approved claims receive a replacement device shipped within 3 business days.
Extended warranty adds a third year for 19 euros when bought within 60 days of
delivery.
""",
    ),
    "shipping.md": (
        "internal",
        """# Shipping and delivery

We ship to all EU member states, Norway, Switzerland and the United Kingdom.
Standard delivery takes 2 to 4 business days and is free for orders above 50
euros; below that it costs 4.95 euros. Express delivery arrives the next
business day when ordered before 15:00 CET and costs 12 euros.

Orders ship from the Rotterdam warehouse. Tracking links are emailed when the
parcel leaves the warehouse. We do not ship to PO boxes.
""",
    ),
    "installation.md": (
        "internal",
        """# Installing the Orbit thermostat

Switch off power to the heating system at the breaker before removing the old
thermostat. Orbit needs a C-wire (common wire) for continuous power; if your
system has no C-wire, use the included Power Bridge adapter at the boiler.

Mount the back plate with the two supplied screws, connect the labelled wires
(R, W, G, Y, C) to the matching terminals, click the display onto the back plate
and restore power. The setup wizard in the Lumenary app pairs the device over
Bluetooth and then joins your 2.4 GHz Wi-Fi network. Orbit does not support
5 GHz-only networks.
""",
    ),
    "privacy-and-data-retention.md": (
        "regulatory",
        """# Privacy and data retention

Lumenary Labs processes temperature readings, schedules and device diagnostics
to run the Orbit service. Readings are stored in the EU (Frankfurt region) and
kept for 24 months, after which they are aggregated and the raw data deleted.

Customers can download all their data from the app under Settings > Privacy >
Export, and can request deletion at any time; deletion completes within 30
days. We never sell personal data. Our data protection officer can be reached
at privacy@lumenary.example.
""",
    ),
    "security.md": (
        "internal",
        """# Account security

Lumenary accounts support two-factor authentication with an authenticator app
or a hardware security key (FIDO2). Business accounts can enforce single
sign-on through SAML 2.0 or OpenID Connect with Okta, Entra ID or Google
Workspace.

Passwords must be at least 12 characters. After 5 failed sign-in attempts the
account is locked for 15 minutes. Devices communicate with the cloud over TLS
1.3, and firmware updates are signed and verified before installation.
""",
    ),
    "pricing.md": (
        "internal",
        """# Plans and pricing

The Orbit thermostat costs 149 euros. Orbit Insights, the optional energy
analytics subscription, costs 3.99 euros per month or 39 euros per year.
Business plans for property managers start at 2 euros per device per month
with a minimum of 25 devices and include the fleet dashboard and API access.

Prices include VAT for consumers in the EU. Business prices exclude VAT.
""",
    ),
    "api-rate-limits.md": (
        "internal",
        """# Developer API and rate limits

The Lumenary REST API is available on business plans. Requests authenticate
with an API key sent in the Authorization header as a bearer token.

Each API key may make 600 requests per minute; bursts above that receive HTTP
429 with a Retry-After header. Webhooks deliver device events at least once and
retry failed deliveries with exponential backoff for up to 24 hours. API keys
can be rotated from the fleet dashboard without downtime.
""",
    ),
    "support.md": (
        "internal",
        """# Customer support

Support is available by chat and email Monday to Friday, 08:00 to 20:00 CET,
and Saturday 10:00 to 16:00 CET. Business customers have a 4-hour first
response target during these hours and a dedicated phone line.

Critical incidents affecting many devices are posted on the status page. The
community forum is moderated by Lumenary staff on working days.
""",
    ),
    "energy-savings.md": (
        "third_party",
        """# Energy savings study (independent)

An independent 2025 study by the Delft Energy Institute followed 1,200 homes
for one heating season. Homes using Orbit's adaptive schedule used on average
11 percent less gas than with a fixed schedule. Savings were highest in
detached houses and lowest in well-insulated apartments. The study notes that
results depend on insulation, climate and occupant behaviour.
""",
    ),
    "travel-expenses.md": (
        "internal",
        """# Employee travel and expenses policy

Employees book business travel through the travel portal. Train travel is
preferred for trips under 600 km. Economy class is required for flights under
6 hours. Hotel costs are reimbursed up to 160 euros per night in capital cities
and 120 euros elsewhere.

Expense claims must be submitted within 30 days with receipts. Meals are
reimbursed up to 50 euros per day. Alcohol is not reimbursed.
""",
    ),
    "remote-work.md": (
        "internal",
        """# Remote work policy

Employees may work remotely up to 3 days per week after their probation period.
Fully remote arrangements need approval from the department head and HR. The
company provides a laptop, a monitor and a one-time home office allowance of
300 euros. Working from abroad is allowed for up to 30 days per year within
the EU.
""",
    ),
}


class DemoQuery:
    """A scripted demo query and what kind of case it is."""

    __slots__ = ("kind", "text")

    def __init__(self, kind: str, text: str):
        self.kind = kind
        self.text = text


DEMO_QUERIES: tuple[DemoQuery, ...] = (
    DemoQuery("in scope", "How many days do I have to return the Orbit thermostat for a refund?"),
    DemoQuery("in scope", "What are the API rate limits per key?"),
    DemoQuery("in scope", "How long is temperature data kept?"),
    DemoQuery("borderline", "Can I get my money back for half a month of Insights?"),
    DemoQuery("borderline", "Does Orbit work with heat pumps?"),
    DemoQuery("out of scope", "Who won the football world cup in 2014?"),
    DemoQuery("out of scope", "What is the boiling point of ethanol?"),
    DemoQuery("greeting", "Hi there!"),
    DemoQuery("scope", "What documents do you have?"),
    DemoQuery(
        "in scope (repeat)", "How many days do I have to return the Orbit thermostat for a refund?"
    ),
)


#: The question the demo suggests trying with ``ragsift ask``: in scope, answered
#: from warranty.md with the default embedder (onnx: confidence 0.79, MEDIUM; 0.86,
#: HIGH, before ADR 020 fit holes). "What is the warranty period?" names no product
#: and scores 0.06 there: short questions without an entity look unlike the SQuAD
#: questions the calibration was fit on, so it is refused.
DEMO_ASK = "How long is the warranty on the Orbit thermostat?"


def sample_documents() -> list[SourceDocument]:
    """The sample corpus as source documents."""
    return [
        SourceDocument(
            doc_id=name.removesuffix(".md"),
            text=text,
            title=text.strip().splitlines()[0].lstrip("# ").strip(),
            source=f"handbook/{name}",
            source_type=stype,
        )
        for name, (stype, text) in SAMPLE_DOCUMENTS.items()
    ]


def write_sample_corpus(directory: Path) -> list[Path]:
    """Write the corpus as Markdown files (what a user would ingest); return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (_stype, text) in SAMPLE_DOCUMENTS.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
