"""What the browser tests share: Airflow's REST API with a token of the UI's login, and Debian's headless Chromium
driving Airflow's UI (the login page, a DAG's trigger form) through Debian's chromedriver.

Both binaries are named explicitly, so Selenium Manager never looks for (or downloads) a browser or a driver; the
flags stop Chromium's background calls to outside hosts, which a closed network refuses, slowly.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from kafka_dr_dev.airflow_rest import ENDED, AirflowRest

CHROMIUM = Path("/usr/bin/chromium")  # Debian's chromium and chromium-driver, installed by the Makefile
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",  # root in a container: no user namespace for the sandbox
    "--disable-gpu",
    "--disable-dev-shm-usage",  # a small /dev/shm in containers
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # without these three, Chromium calls outside hosts at start
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
UI_WAIT = 30.0  # seconds for the UI to show an element: the React app loads its bundle on first use


class AirflowApi(AirflowRest):
    """kafka_dr_dev.airflow_rest's client (the demo's) with what the test asserts on."""

    def new_run(self, dag_id: str, known: set[str], timeout: float = UI_WAIT) -> dict[str, Any]:
        """The first run of `dag_id` whose id is not in `known`, once the API lists it."""
        deadline = time.monotonic() + timeout
        while True:
            fresh = [run for run in self.runs(dag_id) if run["dag_run_id"] not in known]
            if fresh:
                return fresh[0]
            assert time.monotonic() < deadline, f"no new run of {dag_id} within {timeout:g} s"
            time.sleep(0.5)

    def wait_finished(self, dag_id: str, run_id: str, timeout: float) -> dict[str, Any]:
        """The run once it has succeeded or failed; an AssertionError with its task states after `timeout`."""
        run = self.wait(dag_id, run_id, timeout)
        assert run["state"] in ENDED, (
            f"{dag_id} {run_id} still {run['state']} after {timeout:g} s: {self.task_states(dag_id, run_id)}"
        )
        return run

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        """{task_id (with [map_index] when mapped): state} of the run's task instances."""
        return {
            ti["task_id"] + ("" if ti["map_index"] < 0 else f"[{ti['map_index']}]"): ti["state"]
            for ti in self.task_instances(dag_id, run_id)
        }


@contextlib.contextmanager
def chromium() -> Iterator[WebDriver]:
    """Headless Chromium in a profile of its own (removed afterwards), quit at the end."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    assert not missing, f"{', '.join(missing)} missing: `make venv` installs Debian's chromium and chromium-driver"
    profile = Path(tempfile.mkdtemp(prefix="kdr-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        with contextlib.suppress(WebDriverException):
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


class AirflowUi:
    """Airflow 3's UI in a browser, found by what a user sees: labels, button texts, ARIA roles, and the ids and
    test ids Airflow gives its form fields and buttons. Screenshots go to `shots`, numbered in order."""

    def __init__(self, driver: WebDriver, url: str, shots: Path) -> None:
        self.driver = driver
        self.url = url.rstrip("/")
        self.shots = shots
        self.taken: list[Path] = []
        shots.mkdir(parents=True, exist_ok=True)

    def screenshot(self, name: str) -> Path:
        path = self.shots / f"{len(self.taken) + 1:02d}-{name}.png"
        self.driver.save_screenshot(str(path))
        self.taken.append(path)
        return path

    def wait_for(self, by: str, value: str, timeout: float = UI_WAIT) -> WebElement:
        """The element once it is visible."""
        return WebDriverWait(self.driver, timeout).until(
            ec.visibility_of_element_located((by, value)), f"{value} not shown in {timeout:g} s"
        )

    def log_in(self, user: str, password: str) -> None:
        """SimpleAuthManager's login page; the UI's home page answers afterwards."""
        self.driver.get(f"{self.url}/auth/login")
        self.wait_for(By.NAME, "username").send_keys(user)
        self.driver.find_element(By.NAME, "password").send_keys(password)
        self.screenshot("login")
        self.driver.find_element(By.XPATH, "//button[@type='submit' and normalize-space()='Sign in']").click()
        WebDriverWait(self.driver, UI_WAIT).until(
            lambda d: "/auth/login" not in d.current_url, "still on the login page: wrong user or password?"
        )

    def switch_user(self, user: str, password: str) -> None:
        """Log out (the session's cookies and storage dropped) and log in as `user`."""
        self.driver.get(f"{self.url}/api/v2/version")  # a page of the UI's origin (its storage) that runs no UI
        self.driver.delete_all_cookies()
        self.driver.execute_script("window.localStorage.clear(); window.sessionStorage.clear();")
        self.log_in(user, password)

    def answer(self, dag_id: str, run_id: str, task_id: str, option: str, name: str) -> None:
        """The task's Required Action tab (its request's subject and body, and a button per option), a screenshot,
        then the button `option`; returns once the page says the response was received."""
        self.driver.get(f"{self.url}/dags/{dag_id}/runs/{quote(run_id, safe='')}/tasks/{task_id}/required_actions")
        button = self.wait_for(By.CSS_SELECTOR, f"button[data-testid='hitl-option-{option}']")
        self.screenshot(name)
        button.click()
        self.wait_for(By.XPATH, "//*[starts-with(normalize-space(), 'Response received at')]")

    def open_trigger_form(self, dag_id: str) -> None:
        """The DAG's page, then its Trigger button: the trigger form, a dialog with the DAG's params."""
        self.driver.get(f"{self.url}/dags/{dag_id}")
        self.wait_for(By.CSS_SELECTOR, "button[data-testid='trigger-dag-button']").click()
        self.wait_for(By.XPATH, f"//*[@role='dialog']//*[normalize-space()='Trigger Dag - {dag_id}']")
        self.wait_for(By.CSS_SELECTOR, "button[data-testid='trigger-dag-submit']")

    def fill_text(self, param: str, value: str) -> None:
        """A string param: a text field with the id element_<param>. React re-renders the field as it changes, and
        a keystroke may be lost meanwhile: typed again until the field holds `value`."""
        field = self.wait_for(By.ID, f"element_{param}")
        for _ in range(3):
            if field.get_attribute("value") == value:
                return
            field.send_keys(Keys.CONTROL, "a")
            field.send_keys(Keys.BACKSPACE)
            field.send_keys(value)
        assert field.get_attribute("value") == value, f"{param}: {field.get_attribute('value')!r}"

    def choose(self, param: str, label: str, value: str) -> None:
        """An enum param: a select labelled `label`; the option shown as `value` (or "`value`: what it means",
        from the param's values_display). Its hidden input element_<param> holds the value chosen."""
        label_element = self.wait_for(
            By.XPATH, f"//*[@role='dialog']//label[starts-with(normalize-space(), '{label}')]"
        )
        self.driver.find_element(By.ID, label_element.get_attribute("for")).click()  # the combobox opens its options
        option = self.wait_for(
            By.XPATH, f"//*[@role='option'][normalize-space()='{value}' or starts-with(normalize-space(), '{value}:')]"
        )
        option.click()
        chosen = self.driver.find_element(By.NAME, f"element_{param}").get_attribute("value")
        assert chosen == value, f"{label}: {chosen!r} chosen, not {value!r}"

    def form_values(self) -> dict[str, str | None]:
        """{param: value} of the open trigger form, as it would be submitted (selects included, through their
        hidden inputs; a checkbox as "true" or "false")."""
        fields = self.driver.find_elements(By.XPATH, "//*[@role='dialog']//input[starts-with(@name, 'element_')]")
        return {
            field.get_attribute("name").removeprefix("element_"): (
                str(field.is_selected()).lower()
                if field.get_attribute("type") == "checkbox"
                else field.get_attribute("value")
            )
            for field in fields
        }

    def trigger_refused(self, name: str) -> bool:
        """The open form's Trigger button, pressed if it is enabled: True when the form stays open (a form with a
        required param left empty is not submitted). A screenshot either way."""
        button = self.driver.find_element(By.CSS_SELECTOR, "button[data-testid='trigger-dag-submit']")
        if button.is_enabled():
            button.click()
            time.sleep(2)  # a submitted form closes its dialog at once
        self.screenshot(name)
        return bool(self.driver.find_elements(By.CSS_SELECTOR, "button[data-testid='trigger-dag-submit']"))

    def submit_trigger(self, name: str) -> None:
        """A screenshot of the filled form (its lower part, with the Trigger button), then the button."""
        button = self.driver.find_element(By.CSS_SELECTOR, "button[data-testid='trigger-dag-submit']")
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'end'})", button)
        self.screenshot(name)
        button.click()
        # The form closes once Airflow accepted the run (a refused form stays open with its error). The UI's toast
        # saying so is not waited for: it shows for a few seconds only, and a slow page can miss all of them.
        WebDriverWait(self.driver, UI_WAIT).until(ec.invisibility_of_element(button), "the trigger form never closed")
