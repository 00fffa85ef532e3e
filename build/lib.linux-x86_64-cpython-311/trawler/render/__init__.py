"""JavaScript rendering (issue 16): which pages to render, and the browser that does.

``shell.py`` is policy (pure): whether a page's static HTML looks like an
application shell, and what each host has taught us. ``routing.py`` says what
happens to each request a rendered page makes (pure). ``browser.py`` owns
Playwright and Debian's chromium (a pool of contexts, restarts, timeouts);
``session.py`` renders one page with every request it makes sent through the
crawler (``SubresourceFetch``), never by the browser itself.
"""
