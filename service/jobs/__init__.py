"""service.jobs.manager."""
