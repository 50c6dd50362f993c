import AgenraProofs.Ledger
import AgenraProofs.Quota
import AgenraProofs.Certify
import AgenraProofs.Label
import AgenraProofs.Simulation
