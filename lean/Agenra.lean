import Agenra.Ledger
import Agenra.Certify
import Agenra.Label
import Agenra.Simulation
import Agenra.Cbor
import Agenra.Ffi
import Agenra.Budget
