# course/grade.mk: the course kit's grader and the notebooks in JupyterLab
# (included by the Makefile; docs/coursework.md explains the workflow).
#
#   make grade [TASKS=a,b] [HIDDEN=dir] [OUT=dir] [POLICY=fast|teaching]
#              [TIMEOUT=seconds] [BUDGET=seconds]
#                 run each task's tests in processes of their own and score them
#                 (tools/course.py grade): a table, OUT/results.json (Gradescope)
#                 and OUT/junit.xml; OUT defaults to build/grade; POLICY runs
#                 every task under that kernel policy instead of its own;
#                 TIMEOUT limits each test item, BUDGET the whole grade
#                 (defaults in tools/course_grade.py: DEFAULT_TIMEOUT, DEFAULT_BUDGET)
#   make lab      install JupyterLab (requirements-lab.txt) into .venv if it is
#                 missing and open notebooks/ in it, on the teaching kernels
#                 (MINITENSOR_KERNELS=fast make lab for the library's fast ones)

.PHONY: grade lab

# The grader builds what the chosen tasks need itself (make -k), so that a
# student's compile error becomes a score of 0 with the compiler's message
# in the report instead of stopping before any report is written.
grade: $(VENV)/.ok
	$(VPY) tools/course.py grade $(if $(TASKS),--tasks $(TASKS)) $(if $(HIDDEN),--hidden $(HIDDEN)) \
	    $(if $(OUT),--out $(OUT)) $(if $(POLICY),--policy $(POLICY)) \
	    $(if $(TIMEOUT),--timeout $(TIMEOUT)) $(if $(BUDGET),--budget $(BUDGET))

$(VENV)/.lab-ok: requirements-lab.txt $(VENV)/.ok
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements-lab.txt
	@touch $@

# Jupyter refuses to run as root unless told: containers and CI machines often are.
LAB_FLAGS := --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

lab: export MINITENSOR_KERNELS ?= teaching
lab: $(LIBS) $(VENV)/.lab-ok
	$(VENV)/bin/jupyter lab $(LAB_FLAGS)
