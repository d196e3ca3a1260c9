"""pgmjax: graphical-model estimation for differentially private query answering, in JAX."""
from .domain import Domain
from .dataset import Dataset
