"""One module per resource of the API; each builds an ``APIRouter``."""
