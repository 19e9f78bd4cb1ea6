"""The web page of xpuplan: the HTTP API plus a recommend page and a hardware catalog page.

``xpuplan serve`` starts it; :func:`xpuplan.web.app.create_app` builds it. Assets ship inside the
package (no CDN); charts use the ``plotly.min.js`` of the installed ``plotly`` package.
"""
