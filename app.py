"""podsim dashboard: navigation only. Each page lives in app_pages/ and calls podsim's library.

Run it with `podsim dashboard` (or `streamlit run app.py`).
"""

import streamlit as st

st.set_page_config(layout="wide")

pages = [
    st.Page("app_pages/topology.py", title="Topology", default=True),
    st.Page("app_pages/placement.py", title="Placement"),
    st.Page("app_pages/steptime.py", title="Step time"),
    st.Page("app_pages/cluster.py", title="Cluster"),
    st.Page("app_pages/serving.py", title="Serving"),
    st.Page("app_pages/plan.py", title="Plan search"),
    st.Page("app_pages/capacity.py", title="Capacity plan"),
]
st.navigation(pages).run()
