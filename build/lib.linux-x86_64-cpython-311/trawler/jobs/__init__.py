"""The job layer: one home for crawl jobs, used by the CLI, the API and the workers."""
