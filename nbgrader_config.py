"""nbgrader configuration: the repository root is the course directory.

Read by every nbgrader command run here, by formgrader in ``make lab`` and by ``mini-llm
grade``'s feedback and export steps, so they all agree: written answers nobody has graded yet
are *pending* (not 0) in the feedback and the CSV (:mod:`mini_llm.grading.manual`), and math is
typeset offline in formgrader and the feedback (:mod:`mini_llm.grading.offline_math`).
"""

from pathlib import Path

import nbgrader
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

import mini_llm.grading
from mini_llm.grading import formgrader, release
from mini_llm.grading.manual import GetGradesAndPending

c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

COURSE = Path(__file__).resolve().parent  # absolute: "." makes formgrader warn five times
c.CourseDirectory.root = str(COURSE)
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = f"sqlite:///{COURSE / 'gradebook.db'}"

# Generating the release (make exercises, formgrader's Generate) first backs up whatever in the
# release folder git does not hold: nbgrader deletes the folder before writing it again.
release.install()
# Formgrader's Autograde button grades through `mini-llm grade --student` (the sandbox, the
# trusted replay, manual grades kept), not nbgrader's plain kernel; `nbgrader autograde` on the
# command line stops and names `mini-llm grade` (MINI_LLM_PLAIN_AUTOGRADE=1: trusted notebooks).
formgrader.install()

# One course on this machine: the learner's Assignment List and the instructor's tools use an
# exchange folder inside the repository (gitignored) instead of /srv/nbgrader/exchange.
EXCHANGE = COURSE / ".exchange"
EXCHANGE.mkdir(exist_ok=True)  # nbgrader refuses a missing exchange ("Error fetching courses!")
c.Exchange.root = str(EXCHANGE)
# The exchange files everything under the course id: without one, release_assignment and
# collect refuse to run and formgrader disables them.
c.CourseDirectory.course_id = "mini_llm"

# Our templates first: formgrader's and the feedback's math from the book's MathJax, inlined.
TEMPLATES = str(Path(mini_llm.grading.__file__).parent / "templates")
NBGRADER_TEMPLATES = str(
    Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"
)
c.HTMLExporter.extra_template_basedirs = [TEMPLATES, NBGRADER_TEMPLATES]
c.HTMLExporter.filters = {"offline_mathjax": "mini_llm.grading.offline_math.mathjax_html"}

c.GenerateFeedback.preprocessors = [GetGradesAndPending, CSSHTMLHeaderPreprocessor]
c.GenerateFeedback.HTMLExporter.template_name = "mini_llm_feedback"
c.GenerateFeedback.HTMLExporter.sanitize_html = True  # markup in an answer stays text
c.ExportApp.plugin_class = "mini_llm.grading.manual.GradesCsv"
