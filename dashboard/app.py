"""The tracker's dashboard. Start it with `tracker dashboard [--db URL] [--port N] [--host H]`.

The database comes from $TRACKER_DB_URL (set by `tracker dashboard`), else ./tracker.db.
Pages live in views/ (a pages/ folder would be listed by Streamlit itself before the
navigation runs); their logic lives in tracker.dashboard. Nothing is shown before the sign-in
gate (tracker.dashboard.access: loopback, Streamlit's OIDC login, or a trusted proxy) passes.
"""

import streamlit as st

from tracker.dashboard.pages import PAGES
from tracker.dashboard.ui import database_url, sidebar
from tracker.dashboard.viewer import require_viewer, show_viewer

# An emoji favicon is drawn by the browser from a data: URL; a ":material/…:" one would be fetched
# from fonts.gstatic.com on every page (the dashboard asks nothing of any other host).
st.set_page_config(page_title="tracker", page_icon="📈", layout="wide")
viewer = require_viewer()  # stops here with the sign-in, or why not, when nobody may look
navigation = st.navigation([
    st.Page(spec.path, title=spec.title, icon=spec.icon, url_path=spec.url_path,
            default=index == 0)
    for index, spec in enumerate(PAGES)
])
sidebar(database_url())
with st.sidebar:
    show_viewer(viewer)
navigation.run()
