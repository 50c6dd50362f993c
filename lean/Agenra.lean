import Agenra.Ledger
