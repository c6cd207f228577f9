"""The audit trail: hash-chained evidence files, their repair on start and their verification."""

from ragsift.audit.chain import GENESIS, ChainHead
from ragsift.audit.metrics import AuditMetrics
from ragsift.audit.repair import TornTail, repair_torn_tail
from ragsift.audit.sink import AuditFileSink, FsyncPolicy
from ragsift.audit.verify import Break, ChainReport, verify_chain
from ragsift.audit.writer import DiskWriter, RowWriter

__all__ = [
    "GENESIS",
    "AuditFileSink",
    "AuditMetrics",
    "Break",
    "ChainHead",
    "ChainReport",
    "DiskWriter",
    "FsyncPolicy",
    "RowWriter",
    "TornTail",
    "repair_torn_tail",
    "verify_chain",
]
