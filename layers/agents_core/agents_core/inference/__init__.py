"""Inference providers behind one small interface (`types.Provider`), chosen by `router`."""
