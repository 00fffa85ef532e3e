"""`trawler serve`: the REST API (FastAPI) over the job store and the job runner."""
