# dpcli — two commands from a fresh clone:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DPCLI  := $(BIN)/dpcli

.PHONY: demo test lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

# A real end-to-end run on the shipped sample (its own demo budget, started afresh each time).
demo: $(VENV)/.installed
	rm -rf demo
	$(DPCLI) init sample_data/adult_train.parquet --label label --out demo/init/adult.yaml
	$(DPCLI) ledger init --spec configs/demo.yaml
	$(DPCLI) inspect sample_data/adult_train.parquet --spec configs/demo.yaml
	$(DPCLI) tabulate sample_data/adult_train.parquet --spec configs/demo.yaml --dry-run
	$(DPCLI) tabulate sample_data/adult_train.parquet --spec configs/demo.yaml --out demo/adult_counts.csv --reuse
	$(DPCLI) tabulate sample_data/adult_train.parquet --spec configs/demo.yaml --out demo/adult_counts.csv --reuse
	$(DPCLI) tabulate sample_data/adult_train.csv --spec configs/demo.yaml --out demo/adult_sex_race.csv \
		--columns sex,race --epsilon 0.25
	$(DPCLI) train-nb sample_data/adult_train.parquet --spec configs/demo.yaml --out demo/nb.json
	$(DPCLI) predict demo/nb.json sample_data/adult_test.parquet --out demo/predictions.parquet
	@$(BIN)/python -c "import pandas as pd; p = pd.read_parquet('demo/predictions.parquet'); \
		y = p.label; ok = p.prediction == y; \
		print(f'naive Bayes on the public test sample: accuracy {ok.mean():.3f} (majority class: {max(p.label.mean(), 1 - p.label.mean()):.3f}), balanced accuracy {ok.groupby(y).mean().mean():.3f} (its threshold aims at this)')"
	$(DPCLI) select-features sample_data/adult_train.parquet --spec configs/demo.yaml --out demo/features.json
	$(DPCLI) train-nb sample_data/adult_train.parquet --spec configs/demo.yaml --features demo/features.json \
		--out demo/nb_selected.json --epsilon 1.0
	$(DPCLI) predict demo/nb_selected.json sample_data/adult_test.parquet --out demo/predictions_selected.parquet
	@$(BIN)/python -c "import json, pandas as pd; p = pd.read_parquet('demo/predictions_selected.parquet'); \
		cols = json.load(open('demo/features.json'))['payload']['columns']; \
		print(f'selected columns: {cols}; accuracy with them: {(p.prediction == p.label).mean():.3f}')"
	$(DPCLI) roc sample_data/adult_test.parquet --spec configs/demo.yaml --model demo/nb.json --out demo/roc
	$(DPCLI) evaluate sample_data/adult_test.parquet --spec configs/demo.yaml --model demo/nb.json \
		--out demo/evaluation.json
	$(DPCLI) publish-grid sample_data/adult_train.parquet --spec configs/demo.yaml --out demo/synopsis
	$(DPCLI) synthesize demo/synopsis --out demo/synthetic.parquet
	$(DPCLI) predict demo/synopsis/grid.json sample_data/adult_test.parquet --out demo/predictions_grid.parquet
	@$(BIN)/python -c "import pandas as pd; p = pd.read_parquet('demo/predictions_grid.parquet'); \
		s = pd.read_parquet('demo/synthetic.parquet'); \
		print(f'grid synopsis as a histogram classifier: accuracy {(p.prediction == p.label).mean():.3f}; synthetic data: {len(s):,} rows of {list(s.columns)}')"
	$(DPCLI) train-brc sample_data/adult_train.parquet --spec configs/demo.yaml --out demo/brc.json
	$(DPCLI) predict demo/brc.json sample_data/adult_test.parquet --out demo/predictions_brc.parquet
	@$(BIN)/python -c "import pandas as pd; p = pd.read_parquet('demo/predictions_brc.parquet'); \
		y = p.label; ok = p.prediction == y; \
		print(f'brc (all private: the label is protected): accuracy {ok.mean():.3f} (majority class {max(p.label.mean(), 1 - p.label.mean()):.3f}), balanced accuracy {ok.groupby(y).mean().mean():.3f}')"
	$(DPCLI) validate sample_data/adult_train.parquet --spec configs/demo.yaml --out demo/lr.json
	$(DPCLI) predict demo/lr.json sample_data/adult_test.parquet --out demo/predictions_lr.parquet
	@$(BIN)/python -c "import json, pandas as pd; p = pd.read_parquet('demo/predictions_lr.parquet'); \
		m = json.load(open('demo/lr.json'))['payload']; \
		y = p.label; ok = p.prediction == y; \
		print(f'logistic regression (lambda {m[\"lambda\"]:.3g}, {m[\"lambda_rule\"]}): accuracy {ok.mean():.3f} (majority class {max(p.label.mean(), 1 - p.label.mean()):.3f}), balanced accuracy {ok.groupby(y).mean().mean():.3f}')"
	$(DPCLI) ledger show --spec configs/demo.yaml
	$(DPCLI) ledger verify --spec configs/demo.yaml
	@echo "demo outputs are in demo/: adult_counts.csv, nb.json, predictions.parquet, features.json, nb_selected.json, roc/curve.png, evaluation.json, synopsis/, synthetic.parquet, brc.json, lr.json"

# The ruff pinned in pyproject's test extra (and in .pre-commit-config.yaml); part of `make test`.
lint: $(VENV)/.installed
	$(BIN)/ruff check dpcli tests benchmarks

# The mypy pinned in pyproject's test extra, configured in pyproject's [tool.mypy] (files:
# dpcli/, zero errors); part of `make test`.
typecheck: $(VENV)/.installed
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest -q

# The black-box neighbour audit of every spending command at a larger scale (tests/audit/; CI
# runs the same audits at scale 1 with fixed seeds): DPCLI_AUDIT_SCALE times CI's runs, fresh
# OS entropy; prints the table and saves it to benchmarks/results/audit.md.
.PHONY: audit
DPCLI_AUDIT_SCALE ?= 5
audit: $(VENV)/.installed
	$(BIN)/python -m tests.audit.report --scale $(DPCLI_AUDIT_SCALE) --seed os \
		--out benchmarks/results/audit.md

# The Spark engine's tests on a local Spark (PySpark from the spark extra; Java 17 must be
# installed). `DPCLI_SPARK_MASTER=local[4] make test-spark` picks another master.
.PHONY: test-spark
DPCLI_SPARK_MASTER ?= local[2]
test-spark: $(VENV)/.installed-spark
	@command -v java >/dev/null || test -x "$$JAVA_HOME/bin/java" || { echo "test-spark: \
	Java 17 is needed (apt-get install openjdk-17-jre-headless)"; exit 2; }
	DPCLI_SPARK_MASTER='$(DPCLI_SPARK_MASTER)' $(BIN)/python -m pytest -q tests/spark

$(VENV)/.installed-spark: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $@

# Baselines (DuckDB, scikit-learn, diffprivlib) are for the benchmarks only, not dpcli
# dependencies: they go into a separate venv so that dpcli's own is never pinned by them.
BENCH_VENV ?= .venv-bench
bench: $(VENV)/.installed
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet -e . -r benchmarks/requirements.txt
	$(BENCH_VENV)/bin/python -m pip install --quiet --no-deps ISLP==0.6.0  # suite.py: Default.csv only
	$(BENCH_VENV)/bin/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) demo .pytest_cache .ruff_cache *.egg-info
