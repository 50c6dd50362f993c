import AgenraProofs.Ledger
