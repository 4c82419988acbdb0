"""What the job manager refuses, as its own exceptions (no HTTP here): service/http/errors.py maps each to a
response, in one place."""

from __future__ import annotations

__all__ = ["JobError", "JobFinished", "JobNotFinished", "JobNotFound", "NoTrace", "QueueFull"]


class JobError(Exception):
    """A job operation the manager refuses; `job_id` names the job (empty for a refused submission)."""

    def __init__(self, job_id: str, message: str) -> None:
        super().__init__(message)
        self.job_id = job_id


class JobNotFound(JobError):
    """No job has this id."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id, f"no job {job_id}")


class JobFinished(JobError):
    """A cancel came after the job finished (`status`: succeeded, failed, cancelled or timed_out)."""

    def __init__(self, job_id: str, status: str) -> None:
        super().__init__(job_id, f"job {job_id} has already finished ({status})")
        self.status = status


class JobNotFinished(JobError):
    """The job has no result: it is still queued or running (`waiting`), or it ended without one."""

    def __init__(self, job_id: str, status: str) -> None:
        super().__init__(job_id, f"job {job_id} is {status}")
        self.status = status
        self.waiting = status in ("queued", "running")


class NoTrace(JobError):
    """The job has no Chrome trace: a search job (`kind` "search") never has one."""

    def __init__(self, job_id: str, kind: str) -> None:
        super().__init__(job_id, f"job {job_id} has no trace")
        self.kind = kind


class QueueFull(JobError):
    """`queued` jobs are waiting already, the most the service queues."""

    def __init__(self, queued: int) -> None:
        super().__init__("", f"{queued} jobs are waiting, the most this service queues")
        self.queued = queued
