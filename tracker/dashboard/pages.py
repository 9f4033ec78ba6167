"""The pages of the app, in navigation order (``dashboard/app.py`` builds its menu from this)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PageSpec:
    key: str
    title: str
    path: str  # relative to dashboard/app.py
    icon: str

    @property
    def url_path(self) -> str:
        return self.key


PAGES = (
    PageSpec("overview", "Overview", "views/overview.py", ":material/dashboard:"),
    PageSpec("trends", "Trends", "views/trends.py", ":material/show_chart:"),
    PageSpec("frontier", "Frontier", "views/frontier.py", ":material/ssid_chart:"),
    PageSpec("run", "Run detail", "views/run.py", ":material/receipt_long:"),
    PageSpec("compare", "Compare", "views/compare.py", ":material/compare_arrows:"),
    PageSpec("regressions", "Regressions", "views/regressions.py", ":material/flag:"),
    PageSpec("configs", "Configs", "views/configs.py", ":material/history:"),
)


def page(key: str) -> PageSpec:
    for spec in PAGES:
        if spec.key == key:
            return spec
    raise KeyError(key)
