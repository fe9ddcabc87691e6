"""Writes gallery/own_data.ipynb with its outputs (run: .venv/bin/python gallery/make_own_data_notebook.py).
tests/test_gallery.py checks that it matches this generator and executes it (slow set); the numbers it shows are
checked in tests/test_gallery_checks.py."""
import os

from nbformat.v4 import new_code_cell, new_markdown_cell

import _notebook as notebook

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "own_data.ipynb")

CELLS = [
new_markdown_cell("""# Your own data

The built-in datasets are convenient for comparing algorithms, but the point of a model is to fit *your* data. This
notebook takes a table of measurements held in pandas, wraps it in a `bz.datasets.Dataset`, fits a relevance vector
machine, predicts at new inputs, and chooses the kernel width by cross-validation with `bz.cross_validate`.

The table is simulated here so that the notebook runs anywhere; with real data, the only change is where the
DataFrame comes from (`pd.read_csv`, a database query, ...)."""),
new_code_cell("""import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import bayeszoo as bz"""),
new_markdown_cell("""## The data: a pandas table

The electricity load of a building against the outdoor temperature and the relative humidity: a smooth, non-linear
dependence on both, plus measurement noise."""),
new_code_cell("""rng = np.random.default_rng(1)
n = 150
df = pd.DataFrame({"temperature": rng.uniform(5, 35, n), "humidity": rng.uniform(20, 90, n)})
df["load"] = (40 + 12 * np.sin(df["temperature"] / 5) + 0.004 * (df["humidity"] - 55) ** 2
              + rng.normal(0, 1.5, n))
df.describe().round(2)"""),
new_markdown_cell("""## From a DataFrame to a `Dataset`

A `Dataset` holds training arrays `X` (n × d) and `y` (n), optional test arrays, a name and `meta`, whose `task`
tells the models what the targets are. We hold out 30 % of the rows as a test set, and standardise the inputs with
the training set's mean and standard deviation: a Gaussian kernel has one width for all inputs, so they should be on
one scale."""),
new_code_cell("""train = df.sample(frac=0.7, random_state=0)
test = df.drop(train.index)
features = ["temperature", "humidity"]
mean, sd = train[features].mean(), train[features].std()

def standardise(frame):
    return ((frame[features] - mean) / sd).to_numpy()

data = bz.datasets.Dataset(X=standardise(train), y=train["load"].to_numpy(),
                           X_test=standardise(test), y_test=test["load"].to_numpy(),
                           name="building-load", meta={"task": "regression"})
data"""),
new_markdown_cell("""Construction checks the arrays. A missing value, for instance, is refused with a message naming the array,
before any model sees it:"""),
new_code_cell("""broken = train.copy()
broken.iloc[3, 0] = np.nan
try:
    bz.datasets.Dataset(X=standardise(broken), y=broken["load"].to_numpy(), meta={"task": "regression"})
except ValueError as err:
    print("ValueError:", err)"""),
new_markdown_cell("""## A fit

An RVM with a Gaussian kernel has one basis function per training point; type-II maximum likelihood (the fast
Tipping–Faul algorithm, backend `fast`) switches most of them off and keeps a few *relevance vectors*. It takes a
fraction of a second. The fit is an ArviZ `InferenceData` with the weights `w` and their log precisions
`log_alpha` over `basis` (basis 0 is the bias), and the log noise precision `log_beta`."""),
new_code_cell("""model = bz.models.RVM(task="regression", kernel="gauss", width=2.0)
fit = bz.fit(model, data, backend="fast", draws=500, chains=2, seed=0, progress=False)
fit"""),
new_markdown_cell("""`score` gives the model's metrics on the test set: the mean squared error, the mean log predictive density and
the number of relevance vectors. The noise standard deviation of the simulation is 1.5, so an MSE near
1.5² = 2.25 is as good as any model can do."""),
new_code_cell("""model.score(fit, data)"""),
new_markdown_cell("""## Predictions

`model.predict(fit, X)` gives the posterior predictive mean at any inputs on the training scale. Here it is
against the measured load of the held-out rows, and over a grid of temperatures at three humidities; the crosses
are the relevance vectors the fit kept."""),
new_code_cell("""test = test.assign(predicted=model.predict(fit, data.X_test))

w = fit.posterior["w"].mean(("chain", "draw")).values[1:]          # basis 0 is the bias
relevant = train[np.abs(w) > 1e-8]

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
ax1.scatter(test["load"], test["predicted"], s=14, color="k")
lims = [test["load"].min() - 1, test["load"].max() + 1]
ax1.plot(lims, lims, color="grey", lw=1)
ax1.set(xlabel="measured load", ylabel="predicted load", title="held-out rows")

grid = np.linspace(5, 35, 200)
for humidity, colour in zip((30, 55, 80), ("C0", "C1", "C2")):
    rows = pd.DataFrame({"temperature": grid, "humidity": humidity})
    ax2.plot(grid, model.predict(fit, standardise(rows)), color=colour, label=f"humidity {humidity} %")
ax2.scatter(train["temperature"], train["load"], s=8, color="grey", alpha=0.5, label="training data")
ax2.scatter(relevant["temperature"], relevant["load"], marker="x", s=50, color="k", label="relevance vectors")
ax2.set(xlabel="temperature", ylabel="load", title="predictive mean")
ax2.legend(fontsize=8);"""),
new_markdown_cell("""## Choosing the kernel width by cross-validation

The width 2.0 (in standard deviations of the inputs) was a guess. `bz.cross_validate` runs K-fold
cross-validation on the training set, refitting the model on each fold, and returns one array per metric with one
entry per fold. The test set is left alone, so it still gives an honest estimate for the width that is chosen."""),
new_code_cell("""rows = []
for width in (0.25, 0.5, 1.0, 2.0, 4.0):
    cv = bz.cross_validate(bz.models.RVM(width=width), data, backend="fast", folds=5, seed=0, progress=False)
    rows.append({"width": width, "mse": cv["mse"].mean(), "mse sd": cv["mse"].std(),
                 "log_pred": cv["log_pred"].mean(), "relevance vectors": cv["n_relevant"].mean()})
cv_table = pd.DataFrame(rows).set_index("width")
cv_table.round(3)"""),
new_markdown_cell("""Narrow kernels overfit (many relevance vectors, a larger held-out error); the widest ones smooth away the
structure. We refit at the width with the best cross-validated log predictive density and check it on the test
set, against the first guess."""),
new_code_cell("""best = cv_table["log_pred"].idxmax()
tuned = bz.models.RVM(width=best)
tuned_fit = bz.fit(tuned, data, backend="fast", draws=500, chains=2, seed=0, progress=False)
pd.DataFrame({f"width {model.width} (guess)": model.score(fit, data),
              f"width {best} (cross-validated)": tuned.score(tuned_fit, data)}).T.round(3)"""),
new_markdown_cell("""## Beyond the point estimate

Type-II maximum likelihood fixes the precisions at their most likely values. The same model can be fitted by
conjugate Gibbs sampling (`gibbs`), which averages over them; its draws give the predictive uncertainty and the
usual ArviZ diagnostics. Every backend writes the same variables, so the two fits can be compared directly. The
sampler keeps every basis function, most with weights near zero, so its `n_relevant` counts them all; `log_beta`
gives the noise standard deviation, exp(-log_beta / 2), with its uncertainty."""),
new_code_cell("""import arviz as az

gibbs = bz.fit(tuned, data, backend="gibbs", draws=500, tune=300, chains=2, seed=0, progress=False)
print("gibbs:", tuned.score(gibbs, data))
noise_sd = np.exp(-gibbs.posterior["log_beta"] / 2)
print(f"noise sd: {float(noise_sd.mean()):.2f} (94 % interval {float(noise_sd.quantile(0.03)):.2f} to "
      f"{float(noise_sd.quantile(0.97)):.2f})")
az.summary(gibbs.idata, var_names=["log_beta"], kind="all").round(3)"""),
]


def build():
    return notebook.build(CELLS)


if __name__ == "__main__":
    notebook.write(build(), PATH)
